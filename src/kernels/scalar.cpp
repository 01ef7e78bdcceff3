// Plain C++ reference for every kernel: simple, obviously correct, and the baseline the SIMD
// paths are tested against. Also the fallback on CPUs without AVX2.
#include <algorithm>
#include <cmath>

#include "kernels/bf16_pairs.h"
#include "kernels/fp8_pairs.h"
#include "kernels/ggml_interleave.h"
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

// One output of the pairs layout in the tiles' order (tile_model.h): per tile of 32 values of K,
// the even elements' products summed in order, the odd ones' likewise, then acc += even + odd.
template <class X, class W>
float tile_order_dot(int64_t Kp, X x, W w) {
  float acc = 0;
  for (int64_t k0 = 0; k0 < Kp; k0 += kPairK) {
    float even = 0, odd = 0;
    for (int64_t k = k0; k < k0 + kPairK; k += 2) {
      even += x(k) * w(k);
      odd += x(k + 1) * w(k + 1);
    }
    acc += even + odd;
  }
  return acc;
}

void matmul_bf16_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                       int64_t ldy) {
  const auto* wb = static_cast<const bf16_t*>(w);
  const int64_t Kp = pairs_padded_k(K), ld = bf16_pairs_activation_stride(K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n)
      y[m * ldy + n] = tile_order_dot(
          Kp, [&](int64_t k) { return bf16_to_f32(x[m * ld + k]); },
          [&](int64_t k) { return bf16_to_f32(wb[bf16_pairs_index(K, n, k)]); });
}

// FP8 pairs: each weight decoded as the tile decoders do, then the BF16 pairs order.
void matmul_fp8_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, const Fp8Scales& s, int64_t n0,
                      int64_t n1, float* y, int64_t ldy) {
  const auto* codes = static_cast<const uint8_t*>(w);
  const int64_t ld = bf16_pairs_activation_stride(K);
  for (int64_t m = 0; m < M; ++m)  // K is a multiple of 32 in this layout: whole tiles
    for (int64_t n = n0; n < n1; ++n)
      y[m * ldy + n] = tile_order_dot(
          K, [&](int64_t k) { return bf16_to_f32(x[m * ld + k]); },
          [&](int64_t k) {
            return bf16_to_f32(decode_fp8(codes[fp8_pairs_index(K, n, k)], fp8_pairs_scale(s.scheme, s.data, K, n, k)));
          });
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

void matmul_fp8(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s,
                int64_t n0, int64_t n1, float* y, int64_t ldy) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * (e4m3_to_f32(w[n * K + k]) * s.scale(n, k));
      y[m * ldy + n] = acc;
    }
}

// Per output: for each block, the exact integer dot product times (weight scale * activation
// scale), accumulated with one fused multiply-add per block in block order (Q4_K: a second one
// takes the block's min off): the operation sequence of the SIMD kernels, lane for lane, so
// every ISA gives the same bits. `block_dot(g, lane, b32, a, acc)` adds 32-weight block b32 of
// the group block g.
template <class Group, int kBlocks, class BlockDot>
void matmul_groups(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy, BlockDot block_dot) {
  const int64_t nbx = K / 32, nb = nbx / kBlocks;
  const Group* W = static_cast<const Group*>(w);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      const int lane = int(n % kRowGroup);
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b)
        for (int i = 0; i < kBlocks; ++i) block_dot(W[(n / kRowGroup) * nb + b], lane, i, x[m * nbx + b * kBlocks + i], acc);
      y[m * ldy + n] = acc;
    }
}

// Code j of `lane` in chunk c (4 codes of each of the 8 rows per chunk).
template <class T>
inline int32_t code(const T (*chunks)[32], int c, int lane, int j) { return int32_t(chunks[c][4 * lane + j]); }

void matmul_q8_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<BlockQ8_0x8, 1>(x, M, K, w, n0, n1, y, ldy,
                                [](const BlockQ8_0x8& g, int lane, int, const ActBlockQ8& a, float& acc) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += code(g.q, j / 4, lane, j % 4) * a.q[j];
    acc = std::fma(f16_to_f32(g.d[lane]) * a.d, float(s), acc);
  });
}

void matmul_q4_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<BlockQ4_0x8, 1>(x, M, K, w, n0, n1, y, ldy,
                                [](const BlockQ4_0x8& g, int lane, int, const ActBlockQ8& a, float& acc) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) {
      const int32_t byte = code(g.q, j % 16 / 4, lane, j % 4);
      s += ((j < 16 ? byte & 0xF : byte >> 4) - 8) * a.q[j];
    }
    acc = std::fma(f16_to_f32(g.d[lane]) * a.d, float(s), acc);
  });
}

void matmul_q4_k(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<BlockQ4_Kx8, 8>(x, M, K, w, n0, n1, y, ldy,
                                [](const BlockQ4_Kx8& g, int lane, int sub, const ActBlockQ8& a, float& acc) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) {
      const int32_t byte = code(g.q[sub / 2], j / 4, lane, j % 4);
      s += (sub % 2 ? byte >> 4 : byte & 0xF) * a.q[j];
    }
    const float scale = f16_to_f32(g.d[lane]) * float(g.scales[sub][lane]);
    const float min = f16_to_f32(g.dmin[lane]) * float(g.mins[sub][lane]);
    acc = std::fma(scale * a.d, float(s), acc);
    acc = std::fma(-(min * a.d), float(a.sum), acc);
  });
}

// Two sub-blocks of 16 weights, each with its own scale, per block of 32 activations.
void matmul_q6_k(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<BlockQ6_Kx8, 8>(x, M, K, w, n0, n1, y, ldy,
                                [](const BlockQ6_Kx8& g, int lane, int b32, const ActBlockQ8& a, float& acc) {
    for (int h = 2 * b32; h < 2 * b32 + 2; ++h) {
      int32_t s = 0;
      for (int j = 0; j < 16; ++j) s += code(g.q, 4 * h + j / 4, lane, j % 4) * a.q[16 * (h % 2) + j];
      const float scale = f16_to_f32(g.d[lane]) * float(g.scales[h][lane]);
      acc = std::fma(scale * a.d, float(s), acc);
    }
  });
}

}  // namespace

const IsaTable& scalar_table() {
  static const IsaTable t{.isa = Isa::Scalar,
                          .name = "scalar",
                          .bf16_layout = Layout::RowMajor,
                          .matmul_f32 = matmul_f32,
                          .matmul_bf16 = matmul_bf16,
                          .matmul_bf16_bf16 = matmul_bf16_bf16,
                          .dot = dot,
                          .axpy = axpy,
                          .rmsnorm = rmsnorm,
                          .silu_mul = silu_mul,
                          .matmul_fp8 = matmul_fp8,
                          .dot_rows = dot_rows,
                          .axpy_rows = axpy_rows,
                          .q8_0 = {matmul_q8_0, Layout::Rows8, "scalar"},
                          .q4_0 = {matmul_q4_0, Layout::Rows8, "scalar"},
                          .q4_k = {matmul_q4_k, Layout::Rows8, "scalar"},
                          .q6_k = {matmul_q6_k, Layout::Rows8, "scalar"},
                          .quantize_act = quantize_activations,
                          .matmul_bf16_pairs = matmul_bf16_pairs,
                          .softmax = softmax,
                          .to_bf16 = to_bf16_scalar,
                          .fp8_layout = Layout::RowMajor,
                          .matmul_fp8_pairs = matmul_fp8_pairs};
  return t;
}

}  // namespace eaglet::kernels
