// Q8_0 and Q4_0 block matmuls on AVX-512 VNNI, on rows interleaved in groups of 16
// (kernels/ggml_interleave.h): the 256-bit kernels' scheme (matmul_ggml_avx2.cpp) one register
// wider. One 64-byte load holds 4 consecutive codes of 16 rows, the 4 matching activation codes
// are broadcast to the 16 lanes, and one vpdpbusd adds each row's 4 products to its own 32-bit
// lane: exact integers with no 16-bit intermediate. A block ends as one register of 16 row sums,
// scaled by the 16 row scales times the activation scale in one FMA.
//
// vpdpbusd multiplies unsigned by signed bytes. Q4_0's nibbles are the unsigned operand and
// 8 * (sum of the activation codes) is taken off after, as on AVX2. Q8_0 multiplies |w| by the
// activation with w's sign (AVX-512 has no vpsignb: a masked negation does it).
//
// Batch invariance: the block sums are the integers every other kernel computes (the AMX tiles
// sum (nibble - 8) * x, the same integer), and the float operations per block are the scalar
// reference's, in block order, so this kernel, the AMX one and the scalar reference agree bitwise
// whatever M or the thread split.
#include <immintrin.h>

#include <cstring>

#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"
#include "kernels/row_tiles.h"

// Every loop over the rows of a tile or the chunks of a block is unrolled, so the tile's sums
// stay in registers.
#define EAGLET_UNROLL _Pragma("GCC unroll 8")

namespace eaglet::kernels::vnni {
namespace {

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

struct Q4 {
  using Group = BlockQ4_0x16;
  template <int R>
  static void block(const Group& g, const ActBlockQ8* const* a, __m512* acc) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    __m512i s[R];
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) s[r] = _mm512_setzero_si512();
    EAGLET_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m512i raw = load64(g.q[c]);
      const __m512i lo = _mm512_and_si512(raw, low);                         // weights 4c..4c+3
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);  // weights 16+4c..
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) {
        s[r] = _mm512_dpbusd_epi32(s[r], lo, broadcast4(a[r]->q + 4 * c));
        s[r] = _mm512_dpbusd_epi32(s[r], hi, broadcast4(a[r]->q + 16 + 4 * c));
      }
    }
    const __m512 d = f16x16(g.d);
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r)
      acc[r] = scaled(acc[r], d, *a[r], _mm512_sub_epi32(s[r], _mm512_set1_epi32(8 * a[r]->sum)));
  }
};

struct Q8 {
  using Group = BlockQ8_0x16;
  template <int R>
  static void block(const Group& g, const ActBlockQ8* const* a, __m512* acc) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i s[R];
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) s[r] = zero;
    EAGLET_UNROLL
    for (int c = 0; c < 8; ++c) {
      const __m512i w = load64(g.q[c]);
      const __m512i abs_w = _mm512_abs_epi8(w);  // -128 gives 0x80: 128 as vpdpbusd's unsigned operand
      const __mmask64 negative = _mm512_movepi8_mask(w);
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i xv = broadcast4(a[r]->q + 4 * c);
        s[r] = _mm512_dpbusd_epi32(s[r], abs_w, _mm512_mask_sub_epi8(xv, negative, zero, xv));
      }
    }
    const __m512 d = f16x16(g.d);
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = scaled(acc[r], d, *a[r], s[r]);
  }
};

// Rows m..m+R-1 of the 16 outputs of one row group, `valid` of which exist.
template <class Q, int R>
void group_tile(const ActBlockQ8* x, int64_t m, int64_t K, const typename Q::Group* g, float* y, int64_t ldy,
                int64_t valid) {
  const int64_t nb = K / 32;
  __m512 acc[R];
  EAGLET_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const ActBlockQ8* a[R];
  for (int64_t b = 0; b < nb; ++b) {
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) a[r] = x + (m + r) * nb + b;
    Q::template block<R>(g[b], a, acc);
  }
  const __mmask16 keep = valid >= kRowGroup16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
  EAGLET_UNROLL
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (m + r) * ldy, keep, acc[r]);
}

// n0 is a multiple of 16 (the dispatcher's row grain is); outputs past n1 are not written.
template <class Q>
void matmul_groups(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy) {
  const int64_t nb = K / 32;
  const auto* groups = static_cast<const typename Q::Group*>(w);
  for (int64_t n = n0; n < n1; n += kRowGroup16) {
    const typename Q::Group* g = groups + (n / kRowGroup16) * nb;
    for_row_tiles(M, [&](auto R, int64_t m) { group_tile<Q, R()>(x, m, K, g, y + n, ldy, n1 - n); });
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
