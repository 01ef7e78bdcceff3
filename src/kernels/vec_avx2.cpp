// AVX2 vector kernels used by attention and norms.
#include <immintrin.h>

#include <cmath>

#include "kernels/isa_table.h"

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

// As avx512::axpy_rows: the output in registers across rows, 32 floats at a time; the tail
// (dim not a multiple of 8) in axpy()'s scalar order.
void axpy_rows(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out) {
  int64_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    __m256 a0 = _mm256_loadu_ps(out + i), a1 = _mm256_loadu_ps(out + i + 8);
    __m256 a2 = _mm256_loadu_ps(out + i + 16), a3 = _mm256_loadu_ps(out + i + 24);
    for (int64_t r = 0; r < n; ++r) {
      const __m256 wr = _mm256_set1_ps(w[r]);
      const float* x = rows + r * stride + i;
      a0 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(x), a0);
      a1 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(x + 8), a1);
      a2 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(x + 16), a2);
      a3 = _mm256_fmadd_ps(wr, _mm256_loadu_ps(x + 24), a3);
    }
    _mm256_storeu_ps(out + i, a0);
    _mm256_storeu_ps(out + i + 8, a1);
    _mm256_storeu_ps(out + i + 16, a2);
    _mm256_storeu_ps(out + i + 24, a3);
  }
  for (; i + 8 <= dim; i += 8) {
    __m256 a = _mm256_loadu_ps(out + i);
    for (int64_t r = 0; r < n; ++r) a = _mm256_fmadd_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(rows + r * stride + i), a);
    _mm256_storeu_ps(out + i, a);
  }
  for (; i < dim; ++i)
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
