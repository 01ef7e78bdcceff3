// Q8_0 and Q4_0 block matmuls over AMX-style INT8 tiles, written once over a tile backend (the
// real AMX instructions in matmul_amx.cpp, or the portable model in tile_model.h). Included, not
// compiled alone, so each backend's file instantiates it with its own target flags; no library
// calls, for the reason tile_matmul.inl gives.
//
// Weights lie in rows interleaved by 16 (ggml_interleave.h), where one 32-weight block of 16 rows
// is 8 lines of 64 bytes: exactly a B tile for TDPBSSD (K in groups of 4, 16 output columns).
// Q8_0's tiles load straight from the matrix; Q4_0's nibbles are first widened to (nibble - 8)
// bytes, a 16-column panel at a time, which every pass over 16 activation rows then reuses.
// Activations are the per-block int8 codes (ActBlockQ8; rows zero-padded to a multiple of 16 by
// dispatch.cpp), laid out as one A tile per block and pass of 16 rows (ActTile: 512 contiguous,
// line-aligned bytes and the rows' scales) by copy_act_tiles, once per matmul (dispatch.cpp,
// GgmlActTiles): every thread's every column range read the same tiles, and copying them per
// call cost 5-10% at 16-32 rows. Loaded in place, with the row stride of the blocks, every A tile
// touched 16-32 lines (40-byte blocks straddle lines) that the weight stream kept evicting from
// L1: a quarter of the kernel's samples waited on those loads.
//
// Every block's scales differ, so each block has a tile of its own exact integer sums (TDPBSSD
// into a zeroed C tile), stored and scaled into F32 accumulators by the vector unit:
// acc = fma(w_scale * x_scale, float(sum), acc), block after block, the scalar reference's
// operations. The results are therefore bitwise those of the scalar and VNNI kernels, whatever M
// or the split. Two blocks are in flight at once (C0/A0/B0 and C1/A1/B1).
#pragma once
#include <cstdint>

#include "kernels/bf16_pairs.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"

namespace eaglet::kernels::tiles {
namespace {

inline constexpr int64_t kInt8Rows = 16;     // activation rows per pass, output columns per tile
inline constexpr int64_t kPanelBlock = 512;  // bytes of one block's B tile (8 x 64)

// One block of a pass of 16 activation rows: the codes as an A tile (stride 32) and their scales.
struct alignas(64) ActTile {
  int8_t q[kInt8Rows][32];
  float d[kInt8Rows];
};

// Bytes of the A tiles of M rows (64-byte aligned), and of the panel Q4_0 widens its nibbles into.
inline size_t int8_act_tiles_bytes(int64_t M, int64_t K) {
  return size_t(K / 32) * size_t((M + kInt8Rows - 1) / kInt8Rows) * sizeof(ActTile);
}
inline size_t int8_panel_bytes(int64_t K) { return size_t(K / 32) * kPanelBlock; }

// x's rows (padded to a multiple of 16) as A tiles, [pass][block].
inline void copy_act_tiles(const ActBlockQ8* x, int64_t M, int64_t nb, ActTile* out) {
  for (int64_t m = 0; m < M; m += kInt8Rows)
    for (int64_t k = 0; k < nb; ++k) {
      ActTile& t = out[(m / kInt8Rows) * nb + k];
      for (int64_t r = 0; r < kInt8Rows; ++r) {
        const ActBlockQ8& b = x[(m + r) * nb + k];
        __builtin_memcpy(t.q[r], b.q, sizeof(t.q[r]));
        t.d[r] = b.d;
      }
    }
}

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

// The lines of one block of the next 16 columns, asked for (into L2) while this group's blocks
// are multiplied: without it Q4_0's panel was widened only after its weights arrived, and the
// memory stream and the tile work took turns instead of overlapping (into L1, the prefetches
// evicted the panel and the A tiles).
template <class Group>
inline void prefetch_block(const Group* b) {
  const auto first = reinterpret_cast<uintptr_t>(b) & ~uintptr_t(63);
  const auto end = reinterpret_cast<uintptr_t>(b + 1);
  for (uintptr_t line = first; line < end; line += 64) __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
}

// Block k's exact integer sums into C tile `Slot` (0 or 1; A and B tiles 4 + Slot, 6 + Slot).
template <int Slot, class Tiles, class Q>
void issue_block(Tiles& t, const ActTile* a, const typename Q::Group* g, const int8_t* panel,
                 const typename Q::Group* next, int64_t k) {
  if (next) prefetch_block(next + k);
  t.template zero<Slot>();
  t.template load<4 + Slot>(a[k].q, sizeof(a[k].q[0]));
  t.template load<6 + Slot>(Q::tile(g, panel, k), 64);
  t.template dpbssd<Slot, 4 + Slot, 6 + Slot>();
}

// Block k's sums (in C tile `Slot`) scaled into the accumulators.
template <int Slot, class Tiles>
void retire_block(Tiles& t, typename Tiles::Acc& acc, int32_t (*c)[16], int rows, const f16_t* dw,
                  const float* dx) {
  t.template store<Slot>(c, sizeof(c[0]));
  Tiles::add_block(acc, c, rows, dw, dx);
}

// Rows m..m+rows-1 of one group of 16 output columns (`cols` of them valid), over all nb blocks.
// Software-pipelined by one block: block k's tile product is issued before block k - 1's sums are
// stored and scaled, so the store never waits on the product just issued and the tile unit works
// while the vector unit scales.
template <class Tiles, class Q>
void column_tile(Tiles& t, const ActTile* a, int64_t nb, int rows, const typename Q::Group* g,
                 const int8_t* panel, const typename Q::Group* next, int cols, float* y, int64_t ldy) {
  alignas(64) int32_t c0[kInt8Rows][16], c1[kInt8Rows][16];
  typename Tiles::Acc acc;
  Tiles::clear(acc);
  issue_block<0, Tiles, Q>(t, a, g, panel, next, 0);
  int64_t k = 1;
  for (; k + 2 <= nb; k += 2) {
    issue_block<1, Tiles, Q>(t, a, g, panel, next, k);
    retire_block<0, Tiles>(t, acc, c0, rows, g[k - 1].d, a[k - 1].d);
    issue_block<0, Tiles, Q>(t, a, g, panel, next, k + 1);
    retire_block<1, Tiles>(t, acc, c1, rows, g[k].d, a[k].d);
  }
  if (k < nb) {  // nb even: one block left, in slot 1
    issue_block<1, Tiles, Q>(t, a, g, panel, next, k);
    retire_block<0, Tiles>(t, acc, c0, rows, g[k - 1].d, a[k - 1].d);
    retire_block<1, Tiles>(t, acc, c1, rows, g[k].d, a[k].d);
  } else {
    retire_block<0, Tiles>(t, acc, c0, rows, g[k - 1].d, a[k - 1].d);
  }
  Tiles::write(acc, rows, cols, y, ldy);
}

// y[m, n] for m < M and n0 <= n < n1 (n0 a multiple of 16). act: the A tiles of M rows of K / 32
// activation blocks (copy_act_tiles); w: the matrix interleaved by 16; panel: 64-byte aligned,
// int8_panel_bytes(K) of it. The first pass over each group of 16 columns asks for the next
// group's weights, so the stream from memory overlaps the tile work instead of following it.
template <class Tiles, class Q>
void matmul_int8(Tiles& t, const ActTile* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
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
      const typename Q::Group* next = m == 0 && n + kInt8Rows < n1 ? g + nb : nullptr;
      column_tile<Tiles, Q>(t, act + (m / kInt8Rows) * nb, nb, rows, g, p, next, cols, y + m * ldy + n, ldy);
    }
  }
  t.release();
}

}  // namespace
}  // namespace eaglet::kernels::tiles
