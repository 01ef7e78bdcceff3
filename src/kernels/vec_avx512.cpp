// AVX-512 vector kernels used by attention and norms.
#include <immintrin.h>

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

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  const float r = 1.0f / std::sqrt(dot(x, x, n) / float(n) + eps);
  const __m512 vr = _mm512_set1_ps(r);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vr), _mm512_loadu_ps(w + i)));
  for (; i < n; ++i) out[i] = x[i] * r * w[i];
}

}  // namespace eaglet::kernels::avx512
