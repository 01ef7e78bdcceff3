#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"

namespace eaglet::kernels {

const IsaTable& table_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512Bf16: return avx512bf16_table();
    case Isa::Avx512: return avx512_table();
    case Isa::Avx2: return avx2_table();
    case Isa::Scalar: break;
  }
  return scalar_table();
}

const IsaTable& active_table() { return table_for(active_isa()); }

void matmul(const float* x, int64_t M, const WeightView& w, float* y, const float* bias,
            ThreadPool* pool) {
  const IsaTable& t = active_table();
  const int64_t K = w.cols, N = w.rows;
  if (!pool) pool = &ThreadPool::global();
  // Only round activations to BF16 when the weights are BF16 and the CPU multiplies BF16 pairs.
  thread_local std::vector<bf16_t> xb;
  const bool bf16_dot = w.dtype == DType::BF16 && t.matmul_bf16_bf16;
  if (bf16_dot) {
    xb.resize(size_t(M * K));
    for (int64_t i = 0; i < M * K; ++i) xb[size_t(i)] = f32_to_bf16(x[i]);
  }
  const bf16_t* xbp = xb.data();
  pool->parallel_for(
      N,
      [&](int64_t n0, int64_t n1, int) {
        if (w.dtype == DType::F32)
          t.matmul_f32(x, M, K, static_cast<const float*>(w.data), n0, n1, y, N);
        else if (bf16_dot)
          t.matmul_bf16_bf16(xbp, M, K, static_cast<const bf16_t*>(w.data), n0, n1, y, N);
        else
          t.matmul_bf16(x, M, K, static_cast<const bf16_t*>(w.data), n0, n1, y, N);
        if (bias)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = n0; n < n1; ++n) y[m * N + n] += bias[n];
      },
      /*grain=*/16);
}

float dot(const float* a, const float* b, int64_t n) { return active_table().dot(a, b, n); }
void axpy(float a, const float* x, float* y, int64_t n) { active_table().axpy(a, x, y, n); }

void scale(float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  active_table().rmsnorm(x, w, eps, out, n);
}

void silu_mul(const float* g, const float* u, float* out, int64_t n) {
  active_table().silu_mul(g, u, out, n);
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void rope_neox(float* head, const float* cos, const float* sin, int64_t rot_dim) {
  const int64_t half = rot_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = head[i], b = head[i + half];
    head[i] = a * cos[i] - b * sin[i];
    head[i + half] = b * cos[i] + a * sin[i];
  }
}

void to_f32(DType dt, const void* src, float* dst, int64_t n) {
  switch (dt) {
    case DType::F32:
      std::copy_n(static_cast<const float*>(src), n, dst);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const bf16_t*>(src)[i]);
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const f16_t*>(src)[i]);
      return;
    default:
      fail("to_f32: unsupported dtype {}", dtype_name(dt));
  }
}

}  // namespace eaglet::kernels
