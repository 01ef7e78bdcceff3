// The BF16 pairs matmul over AMX-style tiles, written once over a tile backend: the real AMX
// instructions (matmul_amx.cpp) or the portable model of them (tile_model.h). Included, not
// compiled alone, so each backend's file instantiates it with its own target flags.
//
// Tiles: C0..C3 = 0..3 (a 32 x 32 block of y), A0, A1 = 4, 5 (rows m and m + 16), B0, B1 = 6, 7
// (two 16-row weight blocks). No library calls: the file that instantiates it for AMX must not
// emit library code compiled for AMX that other code could link to. Every output element accumulates its K pairs in order, one tile of
// 32 values after another from zero, whatever M, the block it falls in or the thread: the decode
// step (M = 1, one zero-padded A tile) runs exactly the arithmetic of verification and prefill,
// which keeps greedy speculation bitwise lossless.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/bf16_pairs.h"

namespace eaglet::kernels::tiles {

// y[m, n] for m < M and n0 <= n < n1 (n0 a multiple of 16). x: BF16 activations
// [round_up(M, 16), Kp] (bf16_pairs_activations); w: the pairs layout of [N, K].
template <class Tiles>
void matmul_bf16_pairs(Tiles& t, const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
                       float* y, int64_t ldy) {
  // (Arithmetic written out rather than bf16_pairs.h's inline helpers, for the reason above.)
  const int64_t Kp = (K + kPairK - 1) / kPairK * kPairK, Mp = (M + kPairRows - 1) / kPairRows * kPairRows;
  const size_t x_stride = size_t(Kp) * sizeof(bf16_t);
  const size_t block_bytes = size_t(Kp / 2) * Tiles::kRowBytes;  // one block of 16 weight rows
  const auto* wb = static_cast<const uint8_t*>(w);
  alignas(64) float c[4][kPairRows][kPairRows];
  t.configure();
  // Weight blocks outside, row blocks inside: two weight blocks (2 x Kp x 32 bytes) stay in L2
  // while every 32 rows of x pass them, so weights stream from memory once per call.
  for (int64_t nb = n0 / kPairRows; nb * kPairRows < n1; nb += 2) {
    const bool two_n = (nb + 1) * kPairRows < n1;
    const uint8_t* b0 = wb + size_t(nb) * block_bytes;
    const uint8_t* b1 = b0 + block_bytes;
    for (int64_t m = 0; m < Mp; m += 2 * kPairRows) {
      const bool two_m = m + kPairRows < Mp;
      t.template zero<0>();
      t.template zero<1>();
      t.template zero<2>();
      t.template zero<3>();
      for (int64_t k = 0; k < Kp; k += kPairK) {
        const bf16_t* a = x + m * Kp + k;
        const size_t line = size_t(k / 2) * Tiles::kRowBytes;
        t.template load<4>(a, x_stride);
        t.template load<6>(b0 + line, Tiles::kRowBytes);
        t.template dpbf16ps<0, 4, 6>();
        if (two_n) {
          t.template load<7>(b1 + line, Tiles::kRowBytes);
          t.template dpbf16ps<1, 4, 7>();
        }
        if (two_m) {
          t.template load<5>(a + kPairRows * Kp, x_stride);
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
          for (int64_t r = 0; r < rows; ++r)
            std::memcpy(y + (row0 + r) * ldy + col0, c[2 * i + j][r], size_t(cols) * sizeof(float));
        }
    }
  }
  t.release();
}

}  // namespace eaglet::kernels::tiles
