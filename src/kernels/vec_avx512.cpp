// AVX-512 vector kernels used by attention and norms.
#include <immintrin.h>

#include <cmath>

#include "kernels/isa_table.h"
#include "kernels/simd_vec.inl"

namespace eaglet::kernels::avx512 {

static inline __mmask16 mask16(int64_t n) { return __mmask16((1u << n) - 1); }

float dot(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = mask16(n - i);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void axpy(float a, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = mask16(n - i);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// Four rows at a time, each with dot()'s exact sequence of operations: one row's chain of
// multiply-adds is latency-bound at a head's 64 values, four interleave.
void dot_rows(const float* q, const float* rows, int64_t stride, int64_t n, int64_t dim, float scale,
              float* out) {
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) {
    const float* k = rows + r * stride;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= dim; i += 16) {
      const __m512 qi = _mm512_loadu_ps(q + i);
      a0 = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k + i), a0);
      a1 = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k + stride + i), a1);
      a2 = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k + 2 * stride + i), a2);
      a3 = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k + 3 * stride + i), a3);
    }
    if (i < dim) {
      const __mmask16 m = mask16(dim - i);
      const __m512 qi = _mm512_maskz_loadu_ps(m, q + i);
      a0 = _mm512_fmadd_ps(qi, _mm512_maskz_loadu_ps(m, k + i), a0);
      a1 = _mm512_fmadd_ps(qi, _mm512_maskz_loadu_ps(m, k + stride + i), a1);
      a2 = _mm512_fmadd_ps(qi, _mm512_maskz_loadu_ps(m, k + 2 * stride + i), a2);
      a3 = _mm512_fmadd_ps(qi, _mm512_maskz_loadu_ps(m, k + 3 * stride + i), a3);
    }
    out[r] = _mm512_reduce_add_ps(a0) * scale;
    out[r + 1] = _mm512_reduce_add_ps(a1) * scale;
    out[r + 2] = _mm512_reduce_add_ps(a2) * scale;
    out[r + 3] = _mm512_reduce_add_ps(a3) * scale;
  }
  for (; r < n; ++r) out[r] = dot(q, rows + r * stride, dim) * scale;
}

struct F32Vec {
  using V = __m512;
  static constexpr int kWidth = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float a) { return _mm512_set1_ps(a); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V round(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V pow2(V n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static V below(V x, V lo, V y) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y); }
  static float hmax(V a) { return _mm512_reduce_max_ps(a); }
  static float hsum(V a) { return _mm512_reduce_add_ps(a); }
};

void silu_mul(const float* g, const float* u, float* out, int64_t n) { simd::silu_mul<F32Vec>(g, u, out, n); }

void softmax(float* x, int64_t n) { simd::softmax<F32Vec, simd::Lane>(x, n); }

// f32_to_bf16 on 16 lanes: round to nearest even by integer addition, NaN quieted.
void to_bf16(const float* x, int64_t n, bf16_t* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i b = _mm512_castps_si512(_mm512_loadu_ps(x + i));
    const __m512i hi = _mm512_srli_epi32(b, 16);
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(half, _mm512_and_si512(hi, one))), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(b, abs_mask), inf);
    const __m512i r = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(hi, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

// The tail (dim not a multiple of 16) as one masked vector, as in axpy().
void axpy_rows(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out) {
  const int64_t i = simd::axpy_rows_vectors<F32Vec>(w, rows, stride, n, dim, out);
  if (i == dim) return;
  const __mmask16 m = mask16(dim - i);
  __m512 a = _mm512_maskz_loadu_ps(m, out + i);
  for (int64_t r = 0; r < n; ++r)
    a = _mm512_fmadd_ps(_mm512_set1_ps(w[r]), _mm512_maskz_loadu_ps(m, rows + r * stride + i), a);
  _mm512_mask_storeu_ps(out + i, m, a);
}

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  const float r = 1.0f / std::sqrt(dot(x, x, n) / float(n) + eps);
  const __m512 vr = _mm512_set1_ps(r);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vr), _mm512_loadu_ps(w + i)));
  for (; i < n; ++i) out[i] = x[i] * r * w[i];
}

}  // namespace eaglet::kernels::avx512
