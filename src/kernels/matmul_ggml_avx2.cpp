// GGUF Q8_0 / Q4_0 matmuls on AVX2 (the AVX-512 tables use them too): per block of 32 weights,
// 32 int8 products summed exactly in integers (vpmaddubsw with the sign trick, then vpmaddwd),
// converted once and accumulated with one FMA scaled by both block scales. A block costs a
// handful of instructions for all 32 weights, so decode streams the weights at memory speed
// where a float dequantise-and-FMA path would be bound by arithmetic.
//
// Batch invariance: every output element accumulates its blocks in order in its own 8-lane
// register and is reduced the same way, whether it is computed in a tile of 4 rows or alone.
#include <immintrin.h>

#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"

namespace eaglet::kernels::avx2 {
namespace {

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Sum of 16-bit pair sums as 8 float lanes (each an exact integer).
inline __m256 widen(__m256i pairs) { return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1))); }

// vpmaddubsw multiplies unsigned by signed bytes: |w| (computed once per block for all rows)
// times x with w's sign moved onto it. |w| <= 128 and |x| <= 127, so a pair sum stays below 2^15.
inline __m256 signed_dot(__m256i w, __m256i abs_w, const ActBlockQ8& a) {
  return widen(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(load32(a.q), w)));
}

struct Q8Weights {
  using Block = BlockQ8_0;
  static __m256i codes(const Block& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q)); }
};

struct Q4Weights {
  using Block = BlockQ4_0;
  // Byte j: weight j in the low nibble, weight j + 16 in the high one; codes are nibble - 8.
  static __m256i codes(const Block& b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q));
    const __m256i both = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(both, _mm256_set1_epi8(8));
  }
};

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Rows m..m+R-1 of output column n. Even and odd blocks go to two accumulators so consecutive
// FMAs do not wait on each other (one chain would cost the FMA latency per block).
template <class W, int R>
inline void rows_tile(const ActBlockQ8* x, int64_t m, int64_t nb, const typename W::Block* wr, float* y,
                      int64_t ldy, int64_t n) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i w = W::codes(wr[b]);
    const __m256i abs_w = _mm256_sign_epi8(w, w);
    const float dw = _cvtsh_ss(wr[b].d);
    for (int r = 0; r < R; ++r) {
      const ActBlockQ8& a = x[(m + r) * nb + b];
      acc[r][b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a.d), signed_dot(w, abs_w, a), acc[r][b & 1]);
    }
  }
  for (int r = 0; r < R; ++r) y[(m + r) * ldy + n] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
}

template <class W>
void matmul_blocks(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy) {
  const int64_t nb = K / 32;
  const auto* W_ = static_cast<const typename W::Block*>(w);
  for (int64_t n = n0; n < n1; ++n) {
    const typename W::Block* wr = W_ + n * nb;
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) rows_tile<W, 4>(x, m, nb, wr, y, ldy, n);  // 4 rows share each unpacked block
    for (; m < M; ++m) rows_tile<W, 1>(x, m, nb, wr, y, ldy, n);
  }
}

}  // namespace

void matmul_q8_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_blocks<Q8Weights>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_q4_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_blocks<Q4Weights>(x, M, K, w, n0, n1, y, ldy);
}

}  // namespace eaglet::kernels::avx2
