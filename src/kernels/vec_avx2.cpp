// AVX2 vector kernels used by attention and norms.
#include <immintrin.h>

#include <cmath>

#include "kernels/isa_table.h"
#include "kernels/simd_vec.inl"

namespace eaglet::kernels::avx2 {

static inline float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = hsum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

void dot_rows(const float* q, const float* rows, int64_t stride, int64_t n, int64_t dim, float scale,
              float* out) {
  for (int64_t r = 0; r < n; ++r) out[r] = dot(q, rows + r * stride, dim) * scale;
}

struct F32Vec {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V pow2(V n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static V below(V x, V lo, V y) { return _mm256_and_ps(_mm256_cmp_ps(x, lo, _CMP_NLT_UQ), y); }
  static float hmax(V a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static float hsum(V a) { return avx2::hsum(a); }
};

void silu_mul(const float* g, const float* u, float* out, int64_t n) { simd::silu_mul<F32Vec>(g, u, out, n); }

void softmax(float* x, int64_t n) { simd::softmax<F32Vec, simd::Lane>(x, n); }

// f32_to_bf16 on 8 lanes: round to nearest even by integer addition, NaN quieted.
static inline __m256i bf16_bits(const float* x) {
  const __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x));
  const __m256i hi = _mm256_srli_epi32(b, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

void to_bf16(const float* x, int64_t n, bf16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // packus works per 128-bit lane; the permute puts them in order
    const __m256i packed = _mm256_packus_epi32(bf16_bits(x + i), bf16_bits(x + i + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permute4x64_epi64(packed, 0xD8));
  }
  for (; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

// The tail (dim not a multiple of 8) in axpy()'s scalar order.
void axpy_rows(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out) {
  for (int64_t i = simd::axpy_rows_vectors<F32Vec>(w, rows, stride, n, dim, out); i < dim; ++i)
    for (int64_t r = 0; r < n; ++r) out[i] += w[r] * rows[r * stride + i];
}

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  const float r = 1.0f / std::sqrt(dot(x, x, n) / float(n) + eps);
  const __m256 vr = _mm256_set1_ps(r);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vr), _mm256_loadu_ps(w + i)));
  for (; i < n; ++i) out[i] = x[i] * r * w[i];
}

}  // namespace eaglet::kernels::avx2
