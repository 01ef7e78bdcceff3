// MiniMax feed-forward blocks: the gated MLP (dense layers, experts, shared expert) and the
// sigmoid-routed mixture of experts. Tokens of a batch are grouped by expert, so a k+1-token
// verification pass reads each selected expert's weights once, and all experts of a layer run in
// one fork-join (threads split the experts' concatenated rows, kernels::matmul_grouped).
#pragma once
#include <vector>

#include "kernels/ops.h"

namespace eaglet {

struct MlpWeights {
  kernels::WeightView gate, up, down;  // w1, w3, w2 in expert naming
  size_t nbytes() const { return gate.nbytes() + up.nbytes() + down.nbytes(); }
};

// act(gate, up): SiLU-gated, or SwiGLU-OAI: g = min(gate, limit), u = clamp(up, -limit, limit),
// g * sigmoid(alpha * g) * (u + beta).
struct GatedActivation {
  bool swiglu_oai = false;
  float alpha = 1.702f, limit = 7.0f, beta = 1.0f;
  void apply(const float* gate, const float* up, float* out, int64_t n) const;
};

struct MoeWeights {
  kernels::WeightView router;     // [E, H], F32 as released
  std::vector<float> bias;        // e_score_correction_bias [E] (selection only); empty if unused
  std::vector<MlpWeights> experts;
  bool has_shared = false;
  MlpWeights shared;
};

struct MoeRouting {
  int top_k = 0;
  float routed_scaling = 1.0f;
};

// What one forward read: for bandwidth figures and the verification-cost benchmark.
struct FfnStats {
  size_t weight_bytes = 0;
  int64_t experts_touched = 0;  // distinct experts, summed over layers
};

// out [T, H] = down(act(gate(x), up(x))).
void mlp_forward(ThreadPool& pool, const MlpWeights& w, const GatedActivation& act, const float* x, int64_t T, float* out,
                 FfnStats* stats);

// out [T, H] = routed_scaling * sum_e w_e expert_e(x) + shared(x), with s = sigmoid(router(x)),
// experts chosen by top-k of s + bias (ties to the lower id) and w = s / sum of the chosen s.
void moe_forward(ThreadPool& pool, const MoeWeights& w, const MoeRouting& routing, const GatedActivation& act, const float* x,
                 int64_t T, float* out, FfnStats* stats);

}  // namespace eaglet
