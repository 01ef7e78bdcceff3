// The MiniMax decoder (M2 and M3 share it): pre-norm layers of GQA attention (dense, or MSA on
// sparse layers) with q/k norms before partial NeoX RoPE, then a dense gated MLP or a routed MoE.
// Weights may be BF16, FP8-block or MXFP8 and are read from the memory map as stored.
#pragma once
#include <memory>

#include "models/batch_forward.h"
#include "models/minimax/minimax_config.h"
#include "models/minimax/moe.h"
#include "models/minimax/msa.h"
#include "models/rope.h"
#include "models/weights.h"

namespace eaglet {

struct MiniMaxLayer {
  bool sparse = false, moe = false;
  kernels::WeightView q, k, v, o, index_q, index_k;
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm, index_q_norm, index_k_norm;
  MlpWeights mlp;  // dense layers
  MoeWeights moe_weights;
};

class MiniMaxModel : public Model {
 public:
  MiniMaxModel(MiniMaxConfig config, Rope rope, WeightStore weights);

  const ModelConfig& config() const override { return cfg_.base; }
  const MiniMaxConfig& minimax_config() const { return cfg_; }
  KvCacheShape kv_shape(int64_t num_blocks, int block_size) const override;
  void forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, ForwardOutput* out) override;
  void embed(const int* tokens, int64_t n, float* out) const override;
  const kernels::WeightView& lm_head() const override { return lm_head_; }
  const kernels::WeightView& embed_view() const override { return embed_; }
  void final_norm(const float* x, int64_t rows, float* out) const override;
  bool supports_token_trees() const override { return !cfg_.any_sparse(); }
  // Active-parameter bytes: attention, dense MLPs, router, shared expert and top_k experts.
  size_t weight_bytes_per_token() const override;
  std::vector<const kernels::WeightView*> matrices() const override;

  // Records every MSA block selection of the following forwards (nullptr stops).
  void trace_msa(std::vector<MsaSelection>* trace) { msa_trace_ = trace; }

 private:
  void load_weights();
  MlpWeights load_mlp(const std::string& p, const char* gate, const char* up, const char* down, int64_t I);
  std::vector<float> norm_weight(const std::string& name, int64_t n);
  // One forward's buffers: run_forward's and one layer's attention and residual branch (reused by
  // every layer); the MoE block keeps its per-expert batches (their sizes follow the routing).
  struct Scratch {
    ForwardScratch common;
    ScratchBuffer xn, tmp, q, k, v, iq, ik, attn;
  };
  void attention(ThreadPool& pool, Scratch& bufs, int l, KvCache& cache, const std::vector<TokenSlot>& slots, const float* xn, float* out,
                 FfnStats* stats);
  void layer_forward(ThreadPool& pool, Scratch& bufs, int l, KvCache& cache, const std::vector<TokenSlot>& slots, float* x, FfnStats* stats);

  MiniMaxConfig cfg_;
  Rope rope_;
  WeightStore weights_;
  kernels::WeightView embed_, lm_head_;
  std::vector<float> final_norm_;
  std::vector<MiniMaxLayer> layers_;
  AttentionShape attn_shape_;
  GatedActivation act_;
  std::vector<MsaSelection>* msa_trace_ = nullptr;
  ScratchPool<Scratch> scratch_;
};

// Opens `dir` and builds the model; `prefix` selects the language model inside a wrapper.
std::unique_ptr<Model> load_minimax(const std::string& dir, MiniMaxConfig cfg, const JsonConfig& rope_cfg);

}  // namespace eaglet
