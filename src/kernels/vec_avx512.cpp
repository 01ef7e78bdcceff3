// AVX-512 vector kernels used by attention and norms.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/isa_table.h"

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

void dot_rows(const float* q, const float* rows, int64_t stride, int64_t n, int64_t dim, float scale,
              float* out) {
  for (int64_t r = 0; r < n; ++r) out[r] = dot(q, rows + r * stride, dim) * scale;
}

// The output stays in registers across rows, 64 floats at a time: per lane the same chain of
// multiply-adds as axpy() row after row, without a store and reload between rows.
void axpy_rows(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out) {
  int64_t i = 0;
  for (; i + 64 <= dim; i += 64) {
    __m512 a0 = _mm512_loadu_ps(out + i), a1 = _mm512_loadu_ps(out + i + 16);
    __m512 a2 = _mm512_loadu_ps(out + i + 32), a3 = _mm512_loadu_ps(out + i + 48);
    for (int64_t r = 0; r < n; ++r) {
      const __m512 wr = _mm512_set1_ps(w[r]);
      const float* x = rows + r * stride + i;
      a0 = _mm512_fmadd_ps(wr, _mm512_loadu_ps(x), a0);
      a1 = _mm512_fmadd_ps(wr, _mm512_loadu_ps(x + 16), a1);
      a2 = _mm512_fmadd_ps(wr, _mm512_loadu_ps(x + 32), a2);
      a3 = _mm512_fmadd_ps(wr, _mm512_loadu_ps(x + 48), a3);
    }
    _mm512_storeu_ps(out + i, a0);
    _mm512_storeu_ps(out + i + 16, a1);
    _mm512_storeu_ps(out + i + 32, a2);
    _mm512_storeu_ps(out + i + 48, a3);
  }
  for (; i < dim; i += 16) {
    const __mmask16 m = mask16(std::min<int64_t>(16, dim - i));
    __m512 a = _mm512_maskz_loadu_ps(m, out + i);
    for (int64_t r = 0; r < n; ++r)
      a = _mm512_fmadd_ps(_mm512_set1_ps(w[r]), _mm512_maskz_loadu_ps(m, rows + r * stride + i), a);
    _mm512_mask_storeu_ps(out + i, m, a);
  }
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
