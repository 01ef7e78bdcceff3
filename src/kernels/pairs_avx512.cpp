// The BF16 pairs matmul (bf16_pairs.h) on AVX-512 BF16, for CPUs with vdpbf16ps and no AMX (AMD
// Zen 4/5): the same packed weights the AMX tiles read, so pack() has one BF16 layout.
//
// One line of the layout is one register: pair p of a block's 16 rows. A tile of R activation rows
// x NB blocks keeps R x NB accumulators (output columns in lanes, no horizontal sums): each step
// loads NB lines, broadcasts one activation pair per row and adds it to each of the row's
// accumulators with vdpbf16ps, so every weight load feeds R rows (the row-major kernel loaded each
// weight once per row and reduced 16 lanes per output: a 16-token pass cost 3x a step).
//
// Shapes. vdpbf16ps takes ~6 cycles and a core starts two per cycle, so a tile needs 12 or more
// independent accumulators to run at peak, and each needs its activation pair broadcast: with one
// broadcast per vdpbf16ps a Zen 5 core issues ~4.8 G/s of them, one per three ~5.7, none ~6.7
// (tools/issue_rate.cpp). Up to 8 rows run as one tile of 4 blocks (3 from 7 rows), K in chunks
// whose activations stay in L1 while every block's chunk streams past: few rows are bound by
// memory, and 6-8 blocks' streams at once made 2 rows cost 1.3x one (4 blocks: 1.03x).
// More rows run in tiles of up to 8 rows x 3 blocks (24 accumulators, each broadcast feeding 3),
// a group of 3 blocks at a time with its K in chunks that stay in L1 while every row tile passes
// (16 rows of one block, a broadcast per vdpbf16ps, ran 10-15% slower). The activations are
// copied pair-major first, so a tile finds its rows' pairs at fixed offsets from one pointer (rows
// apart in memory took more address registers than x86 has); weight lines are prefetched 4 KB
// ahead, across the jump to the next chunk.
//
// Batch invariance: output (m, n) lives in lane n % 16 of one accumulator that adds pairs
// 0..Kp/2-1 in order from zero, whatever M, the tile it falls in, the K chunking (a chunk's
// accumulators are stored to y and loaded back, exactly) or the thread; the decode step runs the
// same arithmetic as verification and prefill. vdpbf16ps rounds as the CPU does (Intel documents
// both products added in turn, denormals flushed), so results are within rounding of the scalar
// reference, not its bits.
//
// FP8 weights (fp8_pairs.h) run the same tiles over BF16 lines decoded from them. Up to 8 rows, a
// tile rebases each line in registers just before its vdpbf16ps (fp8_rebase_avx512.inl: about
// four vector operations per 32 weights, against twelve in the row-major F32 kernel); more rows
// share a panel of four 32-input groups decoded into L1 (fp8_decode_avx512.cpp), which every row
// tile then passes as BF16 weights. The values are those fp8_pairs.h defines (the AMX tiles read
// the same), and each output still adds its pairs in order from zero whatever M, so FP8 keeps
// BF16's batch invariance.
//
// On AMX machines the tiles run verification and prefill, and the one-row matmuls (the decode
// step) run matmul_bf16_pairs_tile_order (up to 4 rows): this kernel with the tiles' order of
// additions, bit for bit theirs, since a vector loop streams the weights at M = 1 faster than a
// 1-row tile pass does.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bf16_pairs.h"
#include "kernels/fp8_pairs.h"
#include "kernels/fp8_rebase_avx512.inl"
#include "kernels/isa_table.h"
#include "kernels/row_tiles.h"

#define EAGLET_UNROLL _Pragma("GCC unroll 16")

namespace eaglet::kernels::avx512 {
namespace {

constexpr int64_t kLineBytes = 64;          // one pair of 16 rows
constexpr int kTileRows = 8;                // rows of the largest tile
constexpr int kGroupBlocks = 3;             // blocks of a tile of more than 8 rows: 24 accumulators
constexpr int64_t kAhead = 64;              // lines prefetched ahead of the loads (4 KB per stream)
constexpr int64_t kChunkXBytes = 16 << 10;  // up to 8 rows: activations of one K chunk, a third of L1
constexpr int64_t kGroupChunkPairs = 128;   // more rows: a K chunk of 3 blocks, 24 KB of L1
constexpr int64_t kFp8PanelGroups = 4;      // FP8, more than 8 rows: 32-input groups decoded at a time
constexpr int64_t kFp8AheadGroups = 4;      // FP8: tiles prefetched ahead in each block's stream

// A pass over weight blocks [nb, nb + NB) and pairs [p0, p1) for one tile of R rows.
struct TileArgs {
  const int32_t* x;   // the tile's activation pairs, pair-major: (p, i) at x[p * R + i]
  const uint8_t* w;   // block nb's first line
  int64_t block_bytes;
  int64_t p0, p1;
  float* y;           // y[m, 16 * nb]
  int64_t ldy;
  __mmask16 last;     // valid columns of the last of the NB blocks
  bool first;         // start from zero; otherwise add to what y holds
  bool along_k;       // the next pass reads these blocks' next chunk (else the next blocks' same chunk)
};

// PREFETCHT0 (the builtin: GCC 12 dropped _mm_prefetch's from the FP8 helpers below even inlined).
inline void prefetch(const uint8_t* p) { __builtin_prefetch(p, 0, 3); }

// A tile's R x NB accumulators (output columns in lanes; `last`: the valid columns of the last
// block): zero for a tile's first K chunk, else what y holds; and back to y.
template <int R, int NB>
inline void load_acc(__m512 (&acc)[R][NB], const float* y, int64_t ldy, __mmask16 last, bool first) {
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j)
      acc[i][j] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(j == NB - 1 ? last : __mmask16(0xFFFF), y + i * ldy + 16 * j);
}
template <int R, int NB>
inline void store_acc(const __m512 (&acc)[R][NB], float* y, int64_t ldy, __mmask16 last) {
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j)
      _mm512_mask_storeu_ps(y + i * ldy + 16 * j, j == NB - 1 ? last : __mmask16(0xFFFF), acc[i][j]);
}

// The fixed loops are unrolled so the R x NB accumulators stay in registers.
//
// kTileOrder adds in the order AMX's TDPBF16PS does (measured bit for bit on the Intel Xeon AMX VM;
// tile_model.h): within each tile of 16 pairs, the even elements' products summed in pair
// order, the odd elements' likewise, and then acc + (even + odd). vdpbf16ps adds a pair's odd
// product and then its even one, so the two sums run as two vdpbf16ps chains on activation pairs
// with the other half masked to zero (adding an exact zero changes nothing). Twice the dot
// products: a path for few rows, where the weight stream bounds the time.
template <int R, int NB, bool kTileOrder = false>
void tile(const TileArgs& a) {
  __m512 acc[R][NB];
  load_acc(acc, a.y, a.ldy, a.last, a.first);
  [[maybe_unused]] __m512 even[R][NB], odd[R][NB];
  const auto step = [&](int64_t p, const uint8_t* ahead) {
    __m512bh w[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      prefetch(ahead + j * a.block_bytes);
      w[j] = (__m512bh)_mm512_loadu_si512(a.w + j * a.block_bytes + p * kLineBytes);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512i xp = _mm512_set1_epi32(a.x[p * R + i]);
      if constexpr (kTileOrder) {
        const __m512bh xe = (__m512bh)_mm512_and_si512(xp, _mm512_set1_epi32(0xFFFF));
        const __m512bh xo = (__m512bh)_mm512_andnot_si512(_mm512_set1_epi32(0xFFFF), xp);
#pragma GCC unroll 8
        for (int j = 0; j < NB; ++j) {
          even[i][j] = _mm512_dpbf16_ps(even[i][j], xe, w[j]);
          odd[i][j] = _mm512_dpbf16_ps(odd[i][j], xo, w[j]);
        }
      } else {
#pragma GCC unroll 8
        for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)xp, w[j]);
      }
    }
  };
  // One tile of K (kTileOrder): its two sums from zero, then added to the accumulator.
  const auto begin_k_tile = [&] {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) even[i][j] = odd[i][j] = _mm512_setzero_ps();
  };
  const auto end_k_tile = [&] {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_add_ps(acc[i][j], _mm512_add_ps(even[i][j], odd[i][j]));
  };
  // Past the chunk's end, prefetch what the next pass reads: these blocks' next chunk (the lines
  // that follow) or the same chunk of the next group of blocks.
  const int64_t split = std::max(a.p0, a.p1 - kAhead);
  const uint8_t* next = a.along_k ? a.w + kAhead * kLineBytes
                                  : a.w + NB * a.block_bytes + (a.p0 - a.p1 + kAhead) * kLineBytes;
  const auto ahead = [&](int64_t p) { return p < split ? a.w + (p + kAhead) * kLineBytes : next + p * kLineBytes; };
  if constexpr (kTileOrder) {
    for (int64_t p = a.p0; p < a.p1; p += kPairK / 2) {  // chunks start and end on K tiles
      begin_k_tile();
#pragma GCC unroll 16
      for (int64_t q = p; q < p + kPairK / 2; ++q) step(q, ahead(q));
      end_k_tile();
    }
  } else {
    int64_t p = a.p0;
    for (; p < split; ++p) step(p, a.w + (p + kAhead) * kLineBytes);
    for (; p < a.p1; ++p) step(p, next + p * kLineBytes);
  }
  store_acc(acc, a.y, a.ldy, a.last);
}

// The columns [n0, n1), B blocks (the last may be partial), in ceil(B / NB) groups as even as B
// allows, each handed to `pass(a, blocks, first block)` with a.w, a.y and a.last set. A thread's
// chunk is often a few blocks (N / 32 columns: 4 blocks of a 2048-row matrix), and 4 blocks under
// NB = 3 run as 2 + 2: a tile of one block has too few accumulators (3 + 1 took a fifth of a
// 16-row forward).
template <int NB, class Pass>
void for_column_groups(TileArgs a, const uint8_t* w, int64_t n0, int64_t n1, float* y, Pass&& pass) {
  const int64_t B = (n1 - n0 + kPairRows - 1) / kPairRows, groups = (B + NB - 1) / NB;
  int64_t col = n0;
  for (int64_t i = 0; i < groups; ++i) {
    const int64_t blocks = B / groups + (i < B % groups);
    a.w = w + col / kPairRows * a.block_bytes;
    a.y = y + col;
    const int64_t last_cols = std::min<int64_t>(kPairRows, n1 - (col + (blocks - 1) * kPairRows));
    a.last = __mmask16((1u << last_cols) - 1);
    pass(a, blocks, col / kPairRows);
    col += blocks * kPairRows;
  }
}

// Tiles of R rows x 1..NB blocks, by width.
using TileFn = void (*)(const TileArgs&);
template <int R, bool kTileOrder, int... S>
constexpr std::array<TileFn, sizeof...(S)> tiles_by_width(std::integer_sequence<int, S...>) {
  return {&tile<R, S + 1, kTileOrder>...};
}
template <int R, int NB, bool kTileOrder = false>
constexpr auto kTilesUpTo = tiles_by_width<R, kTileOrder>(std::make_integer_sequence<int, NB>{});

// Up to 8 rows: one tile of all of them, R x (up to) NB.
template <int R, int NB, bool kTileOrder = false>
void run_rows(const TileArgs& a, const uint8_t* w, int64_t n0, int64_t n1, float* y) {
  for_column_groups<NB>(a, w, n0, n1, y,
                        [](const TileArgs& g, int64_t blocks, int64_t) { kTilesUpTo<R, NB, kTileOrder>[blocks - 1](g); });
}

// More than 8 rows: groups of 3 blocks, each group's K in chunks that stay in L1 while every row
// tile passes under them (weights from memory once, activations from L2). The row tiles are
// ceil(M / 8) as even as M allows (row_tiles.h); a.x holds their pair-major activations one after
// another, `pairs` pairs each.
void run_tiles(TileArgs a, int64_t M, int64_t pairs, const uint8_t* w, int64_t n0, int64_t n1, float* y) {
  a.along_k = true;
  for_column_groups<kGroupBlocks>(a, w, n0, n1, y, [&](TileArgs g, int64_t blocks, int64_t) {
    for (g.p0 = 0; g.p0 < pairs; g.p0 += kGroupChunkPairs) {
      g.p1 = std::min(pairs, g.p0 + kGroupChunkPairs);
      g.first = g.p0 == 0;
      for_row_tiles<kTileRows>(M, [&, t = g](auto R, int64_t r0) mutable {
        t.x = g.x + r0 * pairs;
        t.y = g.y + r0 * t.ldy;
        kTilesUpTo<R(), kGroupBlocks>[size_t(blocks - 1)](t);
      });
    }
  });
}

// 16 registers of 16 int32 each, transposed: out[i] lane j = in[j] lane i.
inline void transpose16(__m512i v[16]) {
  __m512i t[16];
  EAGLET_UNROLL
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  EAGLET_UNROLL
  for (int i = 0; i < 16; i += 4) {
    EAGLET_UNROLL
    for (int k = 0; k < 2; ++k) {
      v[i + k] = _mm512_unpacklo_epi64(t[i + k], t[i + k + 2]);
      v[i + k + 2] = _mm512_unpackhi_epi64(t[i + k], t[i + k + 2]);
    }
  }
  EAGLET_UNROLL
  for (int i = 0; i < 16; i += 8) {
    EAGLET_UNROLL
    for (int k = 0; k < 4; ++k) {
      t[i + k] = _mm512_shuffle_i32x4(v[i + k], v[i + k + 4], 0x88);
      t[i + k + 4] = _mm512_shuffle_i32x4(v[i + k], v[i + k + 4], 0xDD);
    }
  }
  EAGLET_UNROLL
  for (int k = 0; k < 8; ++k) {
    v[k] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0x88);
    v[k + 8] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0xDD);
  }
}

// Rows [r0, r0 + R) of x (rows `ld` values apart, R <= 16) pair-major into `out`: (p, i) at
// out[p * R + i]. 16 pairs of every row at a time, transposed in registers.
void transpose_pairs(const bf16_t* x, int64_t ld, int64_t r0, int64_t R, int64_t pairs, int32_t* out) {
  // After the in-register transpose, register k holds pair 16b + perm[k] (the shuffles'
  // interleave) with the rows in lanes.
  static constexpr int kPerm[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
  const __mmask16 rows = __mmask16((1u << R) - 1);
  for (int64_t p = 0; p < pairs; p += 16) {
    __m512i v[16];
    EAGLET_UNROLL
    for (int i = 0; i < 16; ++i)
      v[i] = i < R ? _mm512_loadu_si512(x + (r0 + i) * ld + 2 * p) : _mm512_setzero_si512();
    transpose16(v);
    EAGLET_UNROLL
    for (int k = 0; k < 16; ++k) _mm512_mask_storeu_epi32(out + (p + kPerm[k]) * R, rows, v[k]);
  }
}

// The calling thread's pair-major activations, grown to the largest call.
int32_t* transposed_buffer(size_t n) {
  thread_local std::vector<int32_t> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// Pairs per K chunk: the chunk's activations of all M rows fill kChunkXBytes, in whole tiles of K.
int64_t chunk_pairs(int64_t M, int64_t pairs) {
  const int64_t fit = kChunkXBytes / int64_t(sizeof(int32_t)) / M / (kPairK / 2) * (kPairK / 2);
  return std::clamp<int64_t>(fit, kPairK / 2, pairs);
}

// The activations of M > 1 rows pair-major (a buffer of the calling thread); one row already is.
const int32_t* pair_major(const bf16_t* x, int64_t M, int64_t K, int64_t pairs) {
  if (M == 1) return reinterpret_cast<const int32_t*>(x);
  int32_t* buf = transposed_buffer(size_t(M * pairs));
  for_row_tiles<kTileRows>(M, [&](auto R, int64_t r0) {
    transpose_pairs(x, bf16_pairs_activation_stride(K), r0, R(), pairs, buf + r0 * pairs);
  });
  return buf;
}

// Asks for an FP8 tile (its codes and, for MXFP8, its record of scales, which may straddle two
// lines) ahead of its decoding: each block's codes and records are a stream of their own, and
// asking a few tiles ahead beats the hardware prefetcher's guesses over four or more of them.
// (These two are always inlined: as plain inline functions GCC 12 dropped every call to them,
// prefetches and all.)
[[gnu::always_inline]] inline void prefetch_fp8_tile(const uint8_t* codes, const uint8_t* record) {
#pragma GCC unroll 8
  for (int64_t line = 0; line < kFp8TileBytes; line += 64) prefetch(codes + line);
  if (record) prefetch(record), prefetch(record + kMxTileRecord - 1);
}
// While tile (nb, g) of a pass over groups [g0, g1) of a column group `width` blocks wide is
// decoded: the tile kFp8AheadGroups further along block nb, or past g1 as far into the same pass
// of the next column group's block nb + width, which the hardware would find late: only a
// matrix's first tiles wait on memory. (Tiles are numbered nb * groups + g in the order of their
// codes and of their records.)
[[gnu::always_inline]] inline void prefetch_fp8_ahead(const uint8_t* codes, const Fp8Scales& s, int64_t groups,
                                                      int64_t nb, int64_t g, int64_t g0, int64_t g1, int64_t width) {
  const int64_t ga = g + kFp8AheadGroups;
  const int64_t ahead = ga < g1 ? nb * groups + ga : (nb + width) * groups + g0 + (ga - g1);
  const bool mx = s.scheme == QuantScheme::Mxfp8;
  const uint8_t* record = mx ? static_cast<const uint8_t*>(s.data) + ahead * kMxTileRecord : nullptr;
  prefetch_fp8_tile(codes + ahead * kFp8TileBytes, record);
}

// FP8, more than 8 rows: the column groups of up to NB blocks, each decoded kFp8PanelGroups groups
// at a time into the thread's panel and passed by the row tiles (of up to MaxR rows, as pair_major
// laid them out).
template <int NB, int MaxR>
void fp8_panel_tiles(const int32_t* xt, int64_t M, int64_t K, const uint8_t* codes, const Fp8Scales& s, int64_t n0,
                     int64_t n1, float* y, int64_t ldy) {
  alignas(64) static thread_local uint8_t panel[NB * kFp8PanelGroups * kFp8TileBytes * sizeof(bf16_t)];
  const int64_t groups = K / kPairK, pairs = K / 2;
  constexpr int64_t kTileBytes = kFp8TileBytes * sizeof(bf16_t), kLinesPerGroup = kPairK / 2;
  TileArgs a{};
  a.block_bytes = groups * kFp8TileBytes;  // for_column_groups' a.w: the codes of the group's first block
  a.ldy = ldy;
  a.along_k = true;
  for_column_groups<NB>(a, codes, n0, n1, y, [&](TileArgs g, int64_t blocks, int64_t nb) {
    g.block_bytes = kFp8PanelGroups * kTileBytes;  // the tiles read the panel
    for (int64_t g0 = 0; g0 < groups; g0 += kFp8PanelGroups) {
      const int64_t count = std::min(kFp8PanelGroups, groups - g0);
      for (int64_t j = 0; j < blocks; ++j)
        for (int64_t k = g0; k < g0 + count; ++k) {
          prefetch_fp8_ahead(codes, s, groups, nb + j, k, 0, groups, blocks);
          avx512::decode_fp8_tile_vbmi(codes + fp8_pairs_tile_offset(K, nb + j, k),
                                       fp8_pairs_tile_scales(s.scheme, s.data, K, nb + j, k),
                                       panel + (j * kFp8PanelGroups + k - g0) * kTileBytes);
        }
      // The tiles index lines and activation pairs alike: from the panel's first, the activations
      // moved on by the pairs before it.
      g.p0 = 0;
      g.p1 = count * kLinesPerGroup;
      g.first = g0 == 0;
      g.w = panel;
      for_row_tiles<MaxR>(M, [&, t = g](auto R, int64_t r0) mutable {
        t.x = xt + r0 * pairs + g0 * kLinesPerGroup * R();
        t.y = g.y + r0 * t.ldy;
        kTilesUpTo<R(), NB>[size_t(blocks - 1)](t);
      });
    }
  });
}

// FP8, few rows (each weight line feeds at most 8): a tile of R rows x NB blocks over groups
// [g0, g1) that rebases each line to BF16 in registers just before its vdpbf16ps (MXFP8 tiles of
// normal codes and ordinary scales); a group with any other tile decodes its NB tiles into slots
// first. Either way the lines are the panel's bits and each output adds them in pair order, so
// these tiles and the panel's give the same results.
struct Fp8TileArgs {
  const int32_t* x;        // pair-major activations of the R rows
  const uint8_t* codes;    // the matrix's
  const Fp8Scales* s;
  int64_t K, nb;           // nb: the first block
  int64_t g0, g1;
  float* y;                // y[m, 16 * nb]
  int64_t ldy;
  __mmask16 last;
  bool first;
};

template <int R, int NB>
void fp8_tile(const Fp8TileArgs& a) {
  const int64_t groups = a.K / kPairK;
  __m512 acc[R][NB];
  load_acc(acc, a.y, a.ldy, a.last, a.first);
  alignas(64) uint8_t slot[NB][kFp8TileBytes * sizeof(bf16_t)];
  // Lines 2 ch and 2 ch + 1 of group g (codes[j]: block j's tile), from registers (Fast) or the slots.
  const auto chunk = [&]<bool Fast>(int64_t g, int ch, const uint8_t* const* codes, const __m512i* bias) {
    const __m512i zero = _mm512_setzero_si512();
    const int64_t p = g * (kPairK / 2) + 2 * ch;
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      __m512i w0, w1;
      if constexpr (Fast) {
        const __m512i c = _mm512_loadu_si512(codes[j] + 64 * ch);
        w0 = fp8_rebase(_mm512_unpacklo_epi8(zero, c), bias[j]);
        w1 = fp8_rebase(_mm512_unpackhi_epi8(zero, c), bias[j]);
      } else {
        w0 = _mm512_load_si512(slot[j] + 128 * ch);
        w1 = _mm512_load_si512(slot[j] + 128 * ch + 64);
      }
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)_mm512_set1_epi32(a.x[p * R + i]), (__m512bh)w0);
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)_mm512_set1_epi32(a.x[(p + 1) * R + i]), (__m512bh)w1);
      }
    }
  };
  const bool mx = a.s->scheme == QuantScheme::Mxfp8;
  for (int64_t g = a.g0; g < a.g1; ++g) {
    __m512i bias[NB];
    const uint8_t* codes[NB];
    bool fast = mx;
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      const int64_t t = (a.nb + j) * groups + g;
      codes[j] = a.codes + t * kFp8TileBytes;
      prefetch_fp8_ahead(a.codes, *a.s, groups, a.nb + j, g, a.g0, a.g1, NB);
      // The record fp8_pairs_tile_scales finds, found here directly: through that call and a
      // struct per block, this tile ran ~1.4x slower with the weights in cache.
      if (fast) {
        const uint8_t* record = static_cast<const uint8_t*>(a.s->data) + t * kMxTileRecord;
        const __m128i e = fp8_tile_e8m0(record);
        fast = record[kPairRows] != 0 && e8m0_rebases(e);
        bias[j] = fp8_rebase_bias(e);
      }
    }
    if (fast) {
#pragma GCC unroll 8
      for (int ch = 0; ch < 8; ++ch) chunk.template operator()<true>(g, ch, codes, bias);
    } else {
      for (int j = 0; j < NB; ++j)
        decode_fp8_tile_vbmi(codes[j], fp8_pairs_tile_scales(a.s->scheme, a.s->data, a.K, a.nb + j, g),
                             slot[j]);
#pragma GCC unroll 8
      for (int ch = 0; ch < 8; ++ch) chunk.template operator()<false>(g, ch, codes, bias);
    }
  }
  store_acc(acc, a.y, a.ldy, a.last);
}

// Up to 8 rows: K in chunks whose activations stay in L1, each passing every column group of up
// to NB blocks (the last group's width from the table of tiles).
template <int R, int NB>
void fp8_rows(const int32_t* xt, int64_t M, int64_t K, const uint8_t* codes, const Fp8Scales& s, int64_t n0,
              int64_t n1, float* y, int64_t ldy) {
  static constexpr auto kTiles = []<int... W>(std::integer_sequence<int, W...>) {
    return std::array<void (*)(const Fp8TileArgs&), NB>{&fp8_tile<R, W + 1>...};
  }(std::make_integer_sequence<int, NB>{});
  const int64_t groups = K / kPairK, chunk = chunk_pairs(M, K / 2) / (kPairK / 2);
  TileArgs cols{};
  cols.block_bytes = groups * kFp8TileBytes;
  for (int64_t g0 = 0; g0 < groups; g0 += chunk)
    for_column_groups<NB>(cols, codes, n0, n1, y, [&](const TileArgs& c, int64_t blocks, int64_t nb) {
      const Fp8TileArgs a{xt, codes, &s, K, nb, g0, std::min(groups, g0 + chunk), c.y, ldy, c.last, g0 == 0};
      kTiles[size_t(blocks - 1)](a);
    });
}

}  // namespace

void matmul_fp8_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, const Fp8Scales& s, int64_t n0,
                      int64_t n1, float* y, int64_t ldy) {
  const int32_t* xt = pair_major(x, M, K, K / 2);
  const auto* codes = static_cast<const uint8_t*>(w);
  switch (M) {
    case 1: return fp8_rows<1, 4>(xt, M, K, codes, s, n0, n1, y, ldy);
    case 2: return fp8_rows<2, 4>(xt, M, K, codes, s, n0, n1, y, ldy);
    case 3: return fp8_rows<3, 4>(xt, M, K, codes, s, n0, n1, y, ldy);
    case 4: return fp8_rows<4, 4>(xt, M, K, codes, s, n0, n1, y, ldy);
    case 5: return fp8_rows<5, 2>(xt, M, K, codes, s, n0, n1, y, ldy);
    case 6: return fp8_rows<6, 2>(xt, M, K, codes, s, n0, n1, y, ldy);
    case 7: return fp8_rows<7, 2>(xt, M, K, codes, s, n0, n1, y, ldy);
    case 8: return fp8_rows<8, 2>(xt, M, K, codes, s, n0, n1, y, ldy);
    default: return fp8_panel_tiles<kGroupBlocks, kTileRows>(xt, M, K, codes, s, n0, n1, y, ldy);
  }
}

void matmul_bf16_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                       int64_t ldy) {
  const int64_t pairs = pairs_padded_k(K) / 2;
  const int32_t* xt = pair_major(x, M, K, pairs);
  const auto* wb = static_cast<const uint8_t*>(w);
  if (M > kTileRows)
    return run_tiles({xt, nullptr, pairs * kLineBytes, 0, 0, nullptr, ldy, 0xFFFF, true, true}, M, pairs, wb, n0, n1, y);
  // One tile: K in chunks outside the blocks, so the chunk's activations stay in L1.
  const int64_t chunk = chunk_pairs(M, pairs);
  for (int64_t p0 = 0; p0 < pairs; p0 += chunk) {
    const TileArgs a{xt, nullptr, pairs * kLineBytes, p0, std::min(pairs, p0 + chunk), nullptr, ldy, 0xFFFF, p0 == 0, false};
    switch (M) {
      case 1: run_rows<1, 4>(a, wb, n0, n1, y); break;
      case 2: run_rows<2, 4>(a, wb, n0, n1, y); break;
      case 3: run_rows<3, 4>(a, wb, n0, n1, y); break;
      case 4: run_rows<4, 4>(a, wb, n0, n1, y); break;
      case 5: run_rows<5, 4>(a, wb, n0, n1, y); break;
      case 6: run_rows<6, 4>(a, wb, n0, n1, y); break;
      case 7: run_rows<7, 3>(a, wb, n0, n1, y); break;
      default: run_rows<8, 3>(a, wb, n0, n1, y); break;
    }
  }
}

void matmul_bf16_pairs_tile_order(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
                                  float* y, int64_t ldy) {
  const int64_t pairs = pairs_padded_k(K) / 2;
  const int32_t* xt = pair_major(x, M, K, pairs);
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t chunk = chunk_pairs(M, pairs);
  for (int64_t p0 = 0; p0 < pairs; p0 += chunk) {
    const TileArgs a{xt, nullptr, pairs * kLineBytes, p0, std::min(pairs, p0 + chunk), nullptr, ldy, 0xFFFF, p0 == 0, false};
    switch (M) {  // three accumulators per row and block: 12 registers for one row, 24 for two to four
      case 1: run_rows<1, 4, true>(a, wb, n0, n1, y); break;
      case 2: run_rows<2, 4, true>(a, wb, n0, n1, y); break;
      case 3: run_rows<3, 2, true>(a, wb, n0, n1, y); break;
      case 4: run_rows<4, 2, true>(a, wb, n0, n1, y); break;
      default: throw std::invalid_argument("matmul_bf16_pairs_tile_order: M " + std::to_string(M) + " > 4");
    }
  }
}

}  // namespace eaglet::kernels::avx512
