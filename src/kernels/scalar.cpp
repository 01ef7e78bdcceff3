// Plain C++ reference for every kernel: simple, obviously correct, and the baseline the SIMD
// paths are tested against. Also the fallback on CPUs without AVX2.
#include <cmath>

#include "kernels/isa_table.h"

namespace eaglet::kernels {
namespace {

void matmul_f32(const float* x, int64_t M, int64_t K, const float* w, int64_t n0, int64_t n1,
                float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * w[n * K + k];
      y[m * ldy + n] = acc;
    }
}

void matmul_bf16(const float* x, int64_t M, int64_t K, const bf16_t* w, int64_t n0, int64_t n1,
                 float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * bf16_to_f32(w[n * K + k]);
      y[m * ldy + n] = acc;
    }
}

void matmul_bf16_bf16(const bf16_t* x, int64_t M, int64_t K, const bf16_t* w, int64_t n0,
                      int64_t n1, float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += bf16_to_f32(x[m * K + k]) * bf16_to_f32(w[n * K + k]);
      y[m * ldy + n] = acc;
    }
}

float dot(const float* a, const float* b, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void dot_rows(const float* q, const float* rows, int64_t stride, int64_t n, int64_t dim, float scale,
              float* out) {
  for (int64_t r = 0; r < n; ++r) out[r] = dot(q, rows + r * stride, dim) * scale;
}

void axpy_rows(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out) {
  for (int64_t r = 0; r < n; ++r) axpy(w[r], rows + r * stride, out, dim);
}

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * r * w[i];
}

void silu_mul(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void matmul_fp8(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s,
                int64_t n0, int64_t n1, float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * (e4m3_to_f32(w[n * K + k]) * s.scale(n, k));
      y[m * ldy + n] = acc;
    }
}

}  // namespace

const IsaTable& scalar_table() {
  static const IsaTable t{Isa::Scalar, matmul_f32, matmul_bf16, matmul_bf16_bf16, dot,      axpy,
                          rmsnorm,     silu_mul,   matmul_fp8,  dot_rows,         axpy_rows};
  return t;
}

}  // namespace eaglet::kernels
