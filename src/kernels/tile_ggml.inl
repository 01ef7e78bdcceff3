// Q8_0 and Q4_0 block matmuls over AMX-style INT8 tiles, written once over a tile backend (the
// real AMX instructions in matmul_amx.cpp, or the portable model in tile_model.h). Included, not
// compiled alone, so each backend's file instantiates it with its own target flags; no library
// calls, for the reason tile_matmul.inl gives.
//
// Weights lie in rows interleaved by 16 (ggml_interleave.h), where one 32-weight block of 16 rows
// is 8 lines of 64 bytes: exactly a B tile for TDPBSSD (K in groups of 4, 16 output columns).
// Q8_0's tiles load straight from the matrix; Q4_0's nibbles are first widened to (nibble - 8)
// bytes, a 16-column panel at a time, which every pass over 16 activation rows then reuses.
// Activations are the per-block int8 codes (ActBlockQ8), loaded as A tiles of up to 16 rows x 32
// bytes with the row stride of the blocks; their rows are zero-padded to a multiple of 16
// (dispatch.cpp), so any 16 rows can be loaded.
//
// Every block's scales differ, so each block has a tile of its own exact integer sums (TDPBSSD
// into a zeroed C tile), stored and scaled into F32 accumulators by the vector unit:
// acc = fma(w_scale * x_scale, float(sum), acc), block after block, the scalar reference's
// operations. The results are therefore bitwise those of the scalar and VNNI kernels, whatever M
// or the split. Two blocks are in flight at once (C0/A0/B0 and C1/A1/B1), so the tile unit works
// on one while the vector unit scales the other.
#pragma once
#include <cstdint>

#include "kernels/bf16_pairs.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"

namespace eaglet::kernels::tiles {
namespace {

inline constexpr int64_t kInt8Rows = 16;     // activation rows per pass, output columns per tile
inline constexpr int64_t kPanelBlock = 512;  // bytes of one block's B tile (8 x 64)

// C0, C1 = 0, 1; A0, A1 = 4, 5 (16 rows x 32 bytes of codes); B0, B1 = 6, 7 (8 rows x 64 bytes).
inline TileShape int8_tile_shape(int rows) {
  const auto r = uint8_t(rows);
  TileShape s{{r, r, 0, 0, r, r, 8, 8}};
  s.colsb[2] = s.colsb[3] = 0;  // unused
  s.colsb[4] = s.colsb[5] = 32;
  return s;
}

// Where block k's B tile lies for a group of 16 weight rows.
struct Q8Tiles {
  using Group = BlockQ8_0x16;
  template <class Tiles>
  static const int8_t* prepare(const Group*, int64_t, int8_t*) {
    return nullptr;
  }
  static const int8_t* tile(const Group* g, const int8_t*, int64_t k) { return g[k].q[0]; }
};

struct Q4Tiles {
  using Group = BlockQ4_0x16;
  template <class Tiles>
  static const int8_t* prepare(const Group* g, int64_t nb, int8_t* panel) {
    for (int64_t k = 0; k < nb; ++k) Tiles::unpack_q4_0(g[k].q, panel + k * kPanelBlock);
    return panel;
  }
  static const int8_t* tile(const Group*, const int8_t* panel, int64_t k) { return panel + k * kPanelBlock; }
};

// Rows m..m+rows-1 of one group of 16 output columns (`cols` of them valid), over all nb blocks.
template <class Tiles, class Q>
void column_tile(Tiles& t, const ActBlockQ8* a, int64_t nb, int rows, const typename Q::Group* g,
                 const int8_t* panel, int cols, float* y, int64_t ldy) {
  const size_t a_stride = size_t(nb) * sizeof(ActBlockQ8);
  alignas(64) int32_t c0[kInt8Rows][16], c1[kInt8Rows][16];
  typename Tiles::Acc acc;
  Tiles::clear(acc);
  int64_t k = 0;
  for (; k + 2 <= nb; k += 2) {
    t.template zero<0>();
    t.template load<4>(a[k].q, a_stride);
    t.template load<6>(Q::tile(g, panel, k), 64);
    t.template dpbssd<0, 4, 6>();
    t.template zero<1>();
    t.template load<5>(a[k + 1].q, a_stride);
    t.template load<7>(Q::tile(g, panel, k + 1), 64);
    t.template dpbssd<1, 5, 7>();
    t.template store<0>(c0, sizeof(c0[0]));
    Tiles::add_block(acc, c0, rows, g[k].d, a + k, nb);
    t.template store<1>(c1, sizeof(c1[0]));
    Tiles::add_block(acc, c1, rows, g[k + 1].d, a + k + 1, nb);
  }
  if (k < nb) {
    t.template zero<0>();
    t.template load<4>(a[k].q, a_stride);
    t.template load<6>(Q::tile(g, panel, k), 64);
    t.template dpbssd<0, 4, 6>();
    t.template store<0>(c0, sizeof(c0[0]));
    Tiles::add_block(acc, c0, rows, g[k].d, a + k, nb);
  }
  Tiles::write(acc, rows, cols, y, ldy);
}

// y[m, n] for m < M and n0 <= n < n1 (n0 a multiple of 16). x: M rows (zero-padded to a multiple
// of 16) of K / 32 activation blocks; w: the matrix interleaved by 16; panel: K / 32 * 512 bytes
// of scratch (Q4_0's widened codes).
template <class Tiles, class Q>
void matmul_int8(Tiles& t, const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
                 float* y, int64_t ldy, int8_t* panel) {
  const int64_t nb = K / 32;
  // One pass covers M <= 16 exactly (no work on padding); more rows take passes of 16.
  t.configure(int8_tile_shape(M < kInt8Rows ? int(M) : int(kInt8Rows)));
  const auto* groups = static_cast<const typename Q::Group*>(w);
  for (int64_t n = n0; n < n1; n += kInt8Rows) {
    const typename Q::Group* g = groups + (n / kInt8Rows) * nb;
    const int8_t* p = Q::template prepare<Tiles>(g, nb, panel);
    const int cols = int(n1 - n < kInt8Rows ? n1 - n : kInt8Rows);
    for (int64_t m = 0; m < M; m += kInt8Rows) {
      const int rows = int(M - m < kInt8Rows ? M - m : kInt8Rows);
      column_tile<Tiles, Q>(t, x + m * nb, nb, rows, g, p, cols, y + m * ldy + n, ldy);
    }
  }
  t.release();
}

}  // namespace
}  // namespace eaglet::kernels::tiles
