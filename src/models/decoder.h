// The Llama-family decoder (pre-norm, GQA, RoPE, SiLU-gated MLP) that Llama, Qwen2 and Qwen3 all
// are, with the few switches that tell them apart. Each architecture file parses its config into
// DecoderOptions and names its tensors; the forward pass lives here once.
#pragma once
#include <memory>

#include "io/json_config.h"
#include "models/attention.h"
#include "models/batch_forward.h"
#include "models/layer_weights.h"
#include "models/model.h"
#include "models/weights.h"

namespace eaglet {

struct DecoderOptions {
  bool qkv_bias = false;      // Qwen2; Llama and Qwen3 with attention_bias
  bool qk_norm = false;       // Qwen3: RMSNorm per head on q and k before RoPE
  bool tie_embeddings = false;
  bool o_bias = false;        // Llama and Qwen3 with attention_bias
};

class DecoderModel : public Model {
 public:
  // Reads the common Llama-style fields of config.json (hidden_size, num_attention_heads, ...).
  static ModelConfig parse_config(const JsonConfig& cfg, const std::string& dir);
  // Loads every tensor (names under "model.") with shape checks.
  DecoderModel(ModelConfig config, DecoderOptions opts, Rope rope, WeightStore weights);
  // For models built in memory (the built-in model, tests): weights already filled in.
  DecoderModel(ModelConfig config, DecoderOptions opts, Rope rope, WeightStore weights,
               kernels::WeightView embed, kernels::WeightView lm_head, std::vector<float> final_norm,
               std::vector<DecoderLayerWeights> layers);

  const ModelConfig& config() const override { return cfg_; }
  KvCacheShape kv_shape(int64_t num_blocks, int block_size) const override;
  void forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, ForwardOutput* out) override;
  void embed(const int* tokens, int64_t n, float* out) const override;
  const kernels::WeightView& lm_head() const override { return lm_head_; }
  const kernels::WeightView& embed_view() const override { return embed_; }
  void final_norm(const float* x, int64_t rows, float* out) const override;
  size_t weight_bytes_per_token() const override;
  std::vector<const kernels::WeightView*> matrices() const override;
  void quantize_weights(kernels::QuantScheme scheme) override;

 private:
  void load_weights();
  // One forward's buffers: run_forward's and one layer's activations (reused by every layer).
  struct Scratch {
    ForwardScratch common;
    ScratchBuffer xn, q, k, v, attn, tmp, gate, up;
  };
  void layer_forward(ThreadPool& pool, Scratch& s, int l, KvCache& cache, const std::vector<TokenSlot>& slots,
                     float* x);

  ModelConfig cfg_;
  DecoderOptions opts_;
  Rope rope_;
  WeightStore weights_;
  kernels::WeightView embed_, lm_head_;
  std::vector<float> final_norm_;
  std::vector<DecoderLayerWeights> layers_;
  AttentionShape attn_shape_;
  ScratchPool<Scratch> scratch_;
};

}  // namespace eaglet

namespace eaglet {
// Parses config.json, opens the checkpoint and builds the decoder; `opts` carries the
// architecture's switches (tie_embeddings is read from the config here).
// A llama / qwen2 / qwen3 model from a llama.cpp GGUF file (models/gguf_decoder.cpp).
std::unique_ptr<Model> load_gguf_model(const std::string& path);
std::unique_ptr<Model> load_decoder(const std::string& dir, const JsonConfig& cfg,
                                    const std::string& architecture, DecoderOptions opts);
}  // namespace eaglet
