// Q8_0 and Q4_0 block matmuls on AVX-512 VNNI, on rows interleaved in groups of 16
// (kernels/ggml_interleave.h): the 256-bit kernels' scheme (matmul_ggml_avx2.cpp) one register
// wider. One 64-byte load holds 4 consecutive codes of 16 rows, the 4 matching activation codes
// are broadcast to the 16 lanes, and one vpdpbusd adds each row's 4 products to its own 32-bit
// lane: exact integers with no 16-bit intermediate. A block ends as one register of 16 row sums,
// scaled by the 16 row scales times the activation scale in one FMA.
//
// vpdpbusd multiplies unsigned by signed bytes, so the weights are made unsigned and the offset
// comes off through the activation codes' sum, which starts the integer sum: Q4_0's nibbles are
// the codes + 8 (the sum starts at -8 * sum), Q8_0's codes xor 0x80 are the codes + 128 (it
// starts at -128 * sum).
//
// Tiles are up to 4 activation rows x 2 row groups (32 outputs): every weight load feeds each row
// and every broadcast feeds both groups, and 8 independent sums hide vpdpbusd's latency of 4
// cycles. A Zen 5 core issues ~7.2 G vpdpbusd/s from registers, and nearly every other vector
// operation (not loads or broadcasts from memory) takes one of those issue slots: per block, row
// and group a tile has 8 vpdpbusd, 3 operations to scale the sum and, for Q4_0, 3 per line to
// widen the nibbles for every 4 rows. Widening each block once into an L1 panel that the other
// row tiles load was no faster (12-64 rows within a Zen 5 VM's noise, 8 rows slower;
// docs/performance.md).
//
// Batch invariance: the block sums are the integers every other kernel computes (the AMX tiles
// sum (nibble - 8) * x, the same integer), and the float operations per block are the scalar
// reference's, in block order, so this kernel, the AMX one and the scalar reference agree bitwise
// whatever M or the thread split.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"
#include "kernels/row_tiles.h"

// Every loop over the rows or groups of a tile or the chunks of a block is unrolled, so the
// tile's sums stay in registers.
#define EAGLET_UNROLL _Pragma("GCC unroll 8")

namespace eaglet::kernels::vnni {
namespace {

constexpr int kTileRows = 4;    // activation rows per tile (6 and 8 measured no faster)
constexpr int kTileGroups = 2;  // row groups (16 outputs each) per tile (3 x 3 was slower)
// Software prefetch this far ahead of the block being read, in each group's stream.
constexpr int64_t kPrefetchBytes = 1536;

inline __m512i load64(const void* p) { return _mm512_loadu_si512(p); }

// Four activation codes broadcast to the 16 row lanes.
inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512 f16x16(const f16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// Adds a block's 16 row dot products (exact integers) times row scale * activation scale.
inline __m512 scaled(__m512 acc, __m512 scale, const ActBlockQ8& a, __m512i dot) {
  return _mm512_fmadd_ps(_mm512_mul_ps(scale, _mm512_set1_ps(a.d)), _mm512_cvtepi32_ps(dot), acc);
}

// One block (32 codes) of NB row groups `stride` groups apart against R activation rows: the
// integer sums s[r][j], started at `offset` times each row's code sum.
struct Q4 {
  using Group = BlockQ4_0x16;
  static constexpr int kOffset = 8;
  template <int R, int NB>
  static void sums(const Group* g, int64_t stride, const ActBlockQ8* const* a, __m512i (*s)[NB]) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    EAGLET_UNROLL
    for (int c = 0; c < 4; ++c) {
      __m512i lo[NB], hi[NB];
      EAGLET_UNROLL
      for (int j = 0; j < NB; ++j) {
        const __m512i raw = load64(g[j * stride].q[c]);
        lo[j] = _mm512_and_si512(raw, low);                         // codes 4c..4c+3
        hi[j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);  // codes 16+4c..
      }
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i xl = broadcast4(a[r]->q + 4 * c), xh = broadcast4(a[r]->q + 16 + 4 * c);
        EAGLET_UNROLL
        for (int j = 0; j < NB; ++j) s[r][j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s[r][j], lo[j], xl), hi[j], xh);
      }
    }
  }
};

struct Q8 {
  using Group = BlockQ8_0x16;
  static constexpr int kOffset = 128;
  template <int R, int NB>
  static void sums(const Group* g, int64_t stride, const ActBlockQ8* const* a, __m512i (*s)[NB]) {
    const __m512i bias = _mm512_set1_epi8(char(0x80));
    EAGLET_UNROLL
    for (int c = 0; c < 8; ++c) {
      __m512i u[NB];
      EAGLET_UNROLL
      for (int j = 0; j < NB; ++j) u[j] = _mm512_xor_si512(load64(g[j * stride].q[c]), bias);  // code + 128
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i xv = broadcast4(a[r]->q + 4 * c);
        EAGLET_UNROLL
        for (int j = 0; j < NB; ++j) s[r][j] = _mm512_dpbusd_epi32(s[r][j], u[j], xv);
      }
    }
  }
};

// Blocks [b0, b1) of rows m..m+R-1 of the outputs of NB row groups starting at `g` (`nb` blocks
// each, so one group's blocks lie `nb` groups after the last's), added to what y holds unless
// `first`; `valid` of the last group's 16 outputs exist.
template <class Q, int R, int NB>
void group_tile(const ActBlockQ8* x, int64_t m, int64_t nb, int64_t b0, int64_t b1, bool first,
                const typename Q::Group* g, float* y, int64_t ldy, int64_t valid) {
  __mmask16 keep[NB];
  EAGLET_UNROLL
  for (int j = 0; j < NB; ++j)
    keep[j] = j < NB - 1 || valid >= kRowGroup16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
  __m512 acc[R][NB];
  EAGLET_UNROLL
  for (int r = 0; r < R; ++r)
    EAGLET_UNROLL
    for (int j = 0; j < NB; ++j)
      acc[r][j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(keep[j], y + (m + r) * ldy + j * kRowGroup16);
  const ActBlockQ8* a[R];
  for (int64_t b = b0; b < b1; ++b) {
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) a[r] = x + (m + r) * nb + b;
    EAGLET_UNROLL
    for (int j = 0; j < NB; ++j) {
      const char* ahead = reinterpret_cast<const char*>(g + j * nb + b) + kPrefetchBytes;
      for (size_t line = 0; line < sizeof(*g); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    }
    __m512i s[R][NB];
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(-Q::kOffset * a[r]->sum);
      EAGLET_UNROLL
      for (int j = 0; j < NB; ++j) s[r][j] = start;
    }
    Q::template sums<R, NB>(g + b, nb, a, s);
    EAGLET_UNROLL
    for (int j = 0; j < NB; ++j) {
      const __m512 d = f16x16(g[j * nb + b].d);
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) acc[r][j] = scaled(acc[r][j], d, *a[r], s[r][j]);
    }
  }
  EAGLET_UNROLL
  for (int j = 0; j < NB; ++j)
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (m + r) * ldy + j * kRowGroup16, keep[j], acc[r][j]);
}

// Blocks per K chunk: the chunk's activation blocks of all M rows fill kChunkActBytes, so they
// stay in L1 while each row group's chunk streams past every row tile once.
constexpr int64_t kChunkActBytes = 16 << 10;
int64_t chunk_blocks(int64_t M, int64_t nb) {
  return std::clamp<int64_t>(kChunkActBytes / int64_t(sizeof(ActBlockQ8)) / M, 4, nb);
}

// n0 is a multiple of 16 (the dispatcher's row grain is); outputs past n1 are not written. Row
// groups in pairs, then a last one alone; K in chunks, each over all of them.
template <class Q>
void matmul_groups(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy) {
  const int64_t nb = K / 32, chunk = chunk_blocks(M, nb);
  const auto* groups = static_cast<const typename Q::Group*>(w);
  for (int64_t b0 = 0; b0 < nb; b0 += chunk) {
    const int64_t b1 = std::min(nb, b0 + chunk);
    int64_t n = n0;
    for (; n1 - n > (kTileGroups - 1) * kRowGroup16; n += kTileGroups * kRowGroup16) {
      const typename Q::Group* g = groups + (n / kRowGroup16) * nb;
      const int64_t valid = n1 - n - (kTileGroups - 1) * kRowGroup16;
      for_row_tiles<kTileRows>(M, [&](auto R, int64_t m) {
        group_tile<Q, R(), kTileGroups>(x, m, nb, b0, b1, b0 == 0, g, y + n, ldy, valid);
      });
    }
    for (; n < n1; n += kRowGroup16) {
      const typename Q::Group* g = groups + (n / kRowGroup16) * nb;
      for_row_tiles<kTileRows>(M, [&](auto R, int64_t m) {
        group_tile<Q, R(), 1>(x, m, nb, b0, b1, b0 == 0, g, y + n, ldy, n1 - n);
      });
    }
  }
}

}  // namespace

void matmul_q8_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<Q8>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_q4_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<Q4>(x, M, K, w, n0, n1, y, ldy);
}

}  // namespace eaglet::kernels::vnni
