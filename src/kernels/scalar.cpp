// Plain C++ reference for every kernel: simple, obviously correct, and the baseline the SIMD
// paths are tested against. Also the fallback on CPUs without AVX2.
#include <cmath>

#include "kernels/ggml_quant.h"
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

// Per output: for each block, the exact integer dot product scaled by both block scales, summed
// over blocks in order.
template <class Block, class Code>
void matmul_blocks(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy, Code code) {
  const int64_t nb = K / 32;
  const Block* W = static_cast<const Block*>(w);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const Block& wb = W[n * nb + b];
        const ActBlockQ8& a = x[m * nb + b];
        int32_t s = 0;
        for (int j = 0; j < 32; ++j) s += code(wb, j) * int32_t(a.q[j]);
        acc += f16_to_f32(wb.d) * a.d * float(s);
      }
      y[m * ldy + n] = acc;
    }
}

void matmul_q8_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_blocks<BlockQ8_0>(x, M, K, w, n0, n1, y, ldy, [](const BlockQ8_0& b, int j) { return int32_t(b.q[j]); });
}

void matmul_q4_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_blocks<BlockQ4_0>(x, M, K, w, n0, n1, y, ldy, [](const BlockQ4_0& b, int j) {
    return int32_t(j < 16 ? b.q[j] & 0xF : b.q[j - 16] >> 4) - 8;
  });
}

}  // namespace

const IsaTable& scalar_table() {
  static const IsaTable t{Isa::Scalar, matmul_f32, matmul_bf16, matmul_bf16_bf16, dot,      axpy,
                          rmsnorm,     silu_mul,   matmul_fp8,  dot_rows,         axpy_rows,
                          matmul_q8_0, matmul_q4_0};
  return t;
}

}  // namespace eaglet::kernels
