// The CPU ops every model is built from. Activations are F32; weights F32 or BF16. Each op
// dispatches at run time to the best ISA (see core/cpu_features.h) and every SIMD path has a
// scalar reference it is tested against (tests/test_kernels.cpp).
//
// Batch invariance: matmul computes each output element with the same instruction sequence
// whatever M, the tile it falls in, or the thread count. A k+1-token verification pass therefore
// produces bitwise the logits that k+1 single-token decode steps would, which is what makes greedy
// speculative decoding reproduce plain greedy decoding token for token.
#pragma once
#include <cstdint>
#include <functional>

#include "core/dtype.h"
#include "kernels/layout.h"
#include "kernels/quant.h"

namespace eaglet {
class ThreadPool;
}

namespace eaglet::kernels {

// A weight matrix [rows = out features, cols = in features].
struct WeightView {
  DType dtype = DType::F32;  // F32, BF16, F8_E4M3 with `quant` and `scales`, or U8 GGUF blocks
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  QuantScheme quant = QuantScheme::None;
  const void* scales = nullptr;
  size_t scale_bytes = 0;
  Layout layout = Layout::RowMajor;

  // Bytes a full pass over the matrix reads (scales and layout padding included).
  size_t nbytes() const;
  Fp8Scales fp8_scales() const { return Fp8Scales{quant, scales, cols}; }
};

// y[M, N] = x[M, K] * w[N, K]^T (+ bias[N] when given). Threads split the N dimension.
// Every parallel op takes the pool it forks on explicitly (the engine's execution context): there
// is no process-wide pool, so two engines, a benchmark sweep over thread counts and a trainer's
// inference threads never share one by accident.
void matmul(ThreadPool& pool, const float* x, int64_t M, const WeightView& w, float* y,
            const float* bias = nullptr);

// Several independent matmuls (e.g. the experts of one MoE layer) in one fork-join: threads split
// the concatenated output rows of all jobs, so small experts still keep every thread busy.
struct MatmulJob {
  const float* x;  // [M, w.cols]
  int64_t M;
  const WeightView* w;
  float* y;        // [M, w.rows]
};
void matmul_grouped(ThreadPool& pool, const MatmulJob* jobs, size_t num_jobs);

// A gated MLP's first half: out[M, N] = act(x * gate^T, x * up^T), gate and up [N, K], with
// x * up^T left in up_out [M, N]. The thread that computes a range of columns applies the
// activation to it at once, so the activation runs in parallel rather than after the join.
// act(gate, up, out, n) works elementwise (in place on gate allowed); empty = silu(gate) * up.
using GatedActivationFn = std::function<void(const float* gate, const float* up, float* out, int64_t n)>;
void matmul_gated(ThreadPool& pool, const float* x, int64_t M, const WeightView& gate, const WeightView& up,
                  float* out, float* up_out, const GatedActivationFn& act = {});

// Below this many multiply-adds a fork-join costs more than it saves (tiny test and draft models,
// short attention): such work runs on the calling thread. Results do not depend on the choice.
inline constexpr int64_t kMinParallelMacs = int64_t(1) << 16;

float dot(const float* a, const float* b, int64_t n);
void axpy(float a, const float* x, float* y, int64_t n);  // y += a * x
// out[r] = scale * dot(q, rows + r * stride, dim) for r < n (attention scores over cached rows).
void dot_rows(const float* q, const float* rows, int64_t stride, int64_t n, int64_t dim, float scale, float* out);
// out += sum over r < n, in order, of w[r] * (rows + r * stride) (attention's weighted values).
void axpy_rows(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out);
void scale(float* x, float a, int64_t n);
void add(float* y, const float* x, int64_t n);  // y += x
// out = x * rsqrt(mean(x^2) + eps) * w  (in place allowed)
void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n);
// rmsnorm over each of `rows` rows of width n.
void rmsnorm_rows(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* out);
// out[i] = table row ids[i] in F32 (embedding lookup); throws for ids outside [0, table.rows).
void embedding_rows(const WeightView& table, const int* ids, int64_t n, float* out);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);  // silu(gate) * up
void softmax(float* x, int64_t n);                                         // in place, fp32
// Rotates pairs (i, i + rot/2) for i < rot/2 of one head (NeoX / HF "rotate_half" layout).
void rope_neox(float* head, const float* cos, const float* sin, int64_t rot_dim);

// Converts rows of BF16/F32 storage to F32 (embedding lookups, norm weights).
void to_f32(DType dt, const void* src, float* dst, int64_t n);

}  // namespace eaglet::kernels
