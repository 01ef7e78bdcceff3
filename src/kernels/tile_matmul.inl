// The BF16 pairs matmul over AMX-style tiles, written once over a tile backend: the real AMX
// instructions (matmul_amx.cpp) or the portable model of them (tile_model.h). Included, not
// compiled alone, so each backend's file instantiates it with its own target flags.
//
// No library calls: the file that instantiates it for AMX must not emit library code compiled for
// AMX that other code could link to. Every output element accumulates its K pairs in order, one
// tile of 32 values after another from zero, whatever M, the tile shape it falls in or the thread:
// the decode step (M = 1) runs exactly the arithmetic of verification and prefill, which keeps
// greedy speculation bitwise lossless.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/bf16_pairs.h"

namespace eaglet::kernels::tiles {
// Internal linkage: the AMX file and the baseline file each get their own copy, compiled with
// their own flags, of even the non-template helpers.
namespace {

// Tile numbers. Up to 16 rows (M <= 16): C0..C3 are four weight blocks' outputs against one A
// tile (4), the weight tiles cycling through 6, 7, 5. More rows: C0, C1 = rows m..m+15 against
// weight blocks B0 (6), B1 (7); C2, C3 = rows m+16..m+31 (A1 = 5) against the same two.

// Rows of the A and C tiles: exactly M's when one pass over rows covers M (decode, verification
// of up to 32 tokens), so TDPBF16PS does no work on padding; full tiles when rows take several
// passes (prefill), whose padding is a small share.
inline TileShape tile_shape(int64_t M) {
  const auto clamp = [](int64_t r) { return uint8_t(r < 1 ? 1 : r > kPairRows ? kPairRows : r); };
  const uint8_t r0 = M <= 2 * kPairRows ? clamp(M) : uint8_t(kPairRows);
  const uint8_t r1 = M <= 2 * kPairRows ? clamp(M - kPairRows) : uint8_t(kPairRows);
  if (M <= kPairRows) return {{r0, r0, r0, r0, r0, 16, 16, 16}};
  return {{r0, r0, r1, r1, r0, r1, 16, 16}};
}

// Copies the valid part of a C tile (stored in `c`) into y.
inline void emit(const float (*c)[kPairRows], int64_t rows, int64_t cols, float* y, int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * ldy, c[r], size_t(cols) * sizeof(float));
}

// M <= 16: each A tile load serves four weight blocks, so the activations are read once per 64
// output columns and the weights stream as four sequential runs.
template <class Tiles, class B>
void rows16(Tiles& t, const bf16_t* x, int64_t M, int64_t Kp, size_t x_stride, B& b, int64_t n0, int64_t n1,
            float* y, int64_t ldy) {
  alignas(64) float c[4][kPairRows][kPairRows];
  for (int64_t nb = n0 / kPairRows; nb * kPairRows < n1; nb += 4) {
    const int64_t nn = (n1 - nb * kPairRows + kPairRows - 1) / kPairRows;  // blocks left, 1..
    t.template zero<0>();
    t.template zero<1>();
    t.template zero<2>();
    t.template zero<3>();
    for (int64_t k = 0; k < Kp; k += kPairK) {
      t.template load<4>(x + k, x_stride);
      t.template load<6>(b.tile(nb, k), Tiles::kRowBytes);
      t.template dpbf16ps<0, 4, 6>();
      if (nn > 1) {
        t.template load<7>(b.tile(nb + 1, k), Tiles::kRowBytes);
        t.template dpbf16ps<1, 4, 7>();
      }
      if (nn > 2) {
        t.template load<5>(b.tile(nb + 2, k), Tiles::kRowBytes);
        t.template dpbf16ps<2, 4, 5>();
      }
      if (nn > 3) {
        t.template load<6>(b.tile(nb + 3, k), Tiles::kRowBytes);
        t.template dpbf16ps<3, 4, 6>();
      }
    }
    t.template store<0>(c[0], sizeof(c[0][0]));
    if (nn > 1) t.template store<1>(c[1], sizeof(c[0][0]));
    if (nn > 2) t.template store<2>(c[2], sizeof(c[0][0]));
    if (nn > 3) t.template store<3>(c[3], sizeof(c[0][0]));
    for (int64_t j = 0; j < (nn < 4 ? nn : 4); ++j) {
      const int64_t col0 = (nb + j) * kPairRows, cols = n1 - col0 < kPairRows ? n1 - col0 : kPairRows;
      emit(c[j], M, cols, y + col0, ldy);
    }
  }
}

// M > 16: 2 x 2 C tiles. Weight blocks outside, row blocks inside: two weight blocks (2 x Kp x 32
// bytes) stay in L2 while every 32 rows of x pass them, so weights stream from memory once.
template <class Tiles, class B>
void rows32(Tiles& t, const bf16_t* x, int64_t M, int64_t Kp, size_t x_stride, B& b, int64_t n0, int64_t n1,
            float* y, int64_t ldy) {
  const int64_t Mp = (M + kPairRows - 1) / kPairRows * kPairRows, ld = int64_t(x_stride / sizeof(bf16_t));
  alignas(64) float c[4][kPairRows][kPairRows];
  for (int64_t nb = n0 / kPairRows; nb * kPairRows < n1; nb += 2) {
    const bool two_n = (nb + 1) * kPairRows < n1;
    // One pass over the rows (up to 32) takes each tile as it comes; more passes share a panel.
    const bool one_pass = Mp <= 2 * kPairRows;
    const uint8_t* b0 = one_pass ? nullptr : b.panel(nb, two_n ? 2 : 1);
    const uint8_t* b1 = one_pass ? nullptr : b0 + b.panel_block_bytes();
    for (int64_t m = 0; m < Mp; m += 2 * kPairRows) {
      const bool two_m = m + kPairRows < Mp;
      t.template zero<0>();
      t.template zero<1>();
      t.template zero<2>();
      t.template zero<3>();
      for (int64_t k = 0; k < Kp; k += kPairK) {
        const bf16_t* a = x + m * ld + k;
        const size_t line = size_t(k / 2) * Tiles::kRowBytes;  // both blocks' tile at k
        t.template load<4>(a, x_stride);
        t.template load<6>(one_pass ? b.tile(nb, k) : b0 + line, Tiles::kRowBytes);
        t.template dpbf16ps<0, 4, 6>();
        if (two_n) {
          t.template load<7>(one_pass ? b.tile(nb + 1, k) : b1 + line, Tiles::kRowBytes);
          t.template dpbf16ps<1, 4, 7>();
        }
        if (two_m) {
          t.template load<5>(a + kPairRows * ld, x_stride);
          t.template dpbf16ps<2, 5, 6>();
          if (two_n) t.template dpbf16ps<3, 5, 7>();
        }
      }
      t.template store<0>(c[0], sizeof(c[0][0]));
      if (two_n) t.template store<1>(c[1], sizeof(c[0][0]));
      if (two_m) t.template store<2>(c[2], sizeof(c[0][0]));
      if (two_m && two_n) t.template store<3>(c[3], sizeof(c[0][0]));
      for (int i = 0; i < (two_m ? 2 : 1); ++i)
        for (int j = 0; j < (two_n ? 2 : 1); ++j) {
          const int64_t row0 = m + i * kPairRows, col0 = (nb + j) * kPairRows;
          const int64_t rows = M - row0 < kPairRows ? M - row0 : kPairRows;
          const int64_t cols = n1 - col0 < kPairRows ? n1 - col0 : kPairRows;
          emit(c[2 * i + j], rows, cols, y + row0 * ldy + col0, ldy);
        }
    }
  }
}

// Both row strategies over a source of B tiles: `tile(nb, k)` is weight block nb's tile at input
// k (asked for once each, in k order, when one pass over the rows covers M <= 32), `panel(nb,
// count)` the start of `count` whole blocks `panel_block_bytes()` apart (rows32 passes over them
// once per 32 rows when M > 32).
template <class Tiles, class B>
void run_tiles(Tiles& t, const bf16_t* x, int64_t M, int64_t Kp, size_t x_stride, B& b, int64_t n0, int64_t n1,
               float* y, int64_t ldy) {
  t.configure(tile_shape(M));
  if (M <= kPairRows) rows16(t, x, M, Kp, x_stride, b, n0, n1, y, ldy);
  else rows32(t, x, M, Kp, x_stride, b, n0, n1, y, ldy);
  t.release();
}

// BF16 weights already in the pairs layout: tiles are read where they lie.
struct Bf16Blocks {
  static constexpr size_t kLineBytes = kPairRows * 2 * sizeof(bf16_t);  // one pair of 16 rows
  const uint8_t* w;
  size_t block_bytes;  // one block of 16 weight rows
  const uint8_t* tile(int64_t nb, int64_t k) const { return w + size_t(nb) * block_bytes + size_t(k / 2) * kLineBytes; }
  const uint8_t* panel(int64_t nb, int64_t) const { return w + size_t(nb) * block_bytes; }
  size_t panel_block_bytes() const { return block_bytes; }
};

// y[m, n] for m < M and n0 <= n < n1 (n0 a multiple of 16). x: BF16 activations as
// bf16_pairs_activations lays them out; w: the pairs layout of [N, K].
template <class Tiles>
void matmul_bf16_pairs(Tiles& t, const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
                       float* y, int64_t ldy) {
  // (Arithmetic written out rather than bf16_pairs.h's inline helpers, for the reason above.)
  const int64_t Kp = (K + kPairK - 1) / kPairK * kPairK;
  const size_t x_stride = size_t(Kp + kPairK) * sizeof(bf16_t);  // bf16_pairs_activation_stride
  Bf16Blocks b{static_cast<const uint8_t*>(w), size_t(Kp / 2) * Tiles::kRowBytes};
  run_tiles(t, x, M, Kp, x_stride, b, n0, n1, y, ldy);
}

}  // namespace
}  // namespace eaglet::kernels::tiles
