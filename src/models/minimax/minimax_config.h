// The switches that tell MiniMax-M2 and MiniMax-M3 apart, read from config.json. Both are
// pre-norm MoE decoders with per-head-dim q/k norms and partial NeoX RoPE; M3 adds dense layers,
// a shared expert, SwiGLU-OAI, Gemma norms and MiniMax Sparse Attention (MSA).
#pragma once
#include <string>
#include <vector>

#include "io/json_config.h"
#include "kernels/quant.h"
#include "models/model.h"

namespace eaglet {

// MiniMax Sparse Attention block selection (vLLM semantics, see msa.h).
struct MsaConfig {
  int index_dim = 128;
  int index_heads = 4;    // one per KV head: index head g selects the blocks of KV head g
  int topk_blocks = 16;   // budget, forced blocks included
  int block_size = 128;
  int init_blocks = 0;    // always-selected leading blocks
  int local_blocks = 1;   // always-selected trailing (most recent) blocks
};

struct MiniMaxConfig {
  ModelConfig base;             // hidden, heads, vocab, ... (intermediate = expert intermediate)
  std::string prefix;           // "language_model." for the multimodal wrapper, else ""
  bool gemma_norm = false;      // y = x * rsqrt(mean(x^2) + eps) * (1 + w)
  bool qk_norm = true;
  bool qk_norm_per_head = true; // false: one norm over all heads (M2's "per_layer")
  bool swiglu_oai = false;      // else SiLU-gated
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f, swiglu_beta = 1.0f;
  int dense_intermediate = 0;   // MLP of dense (non-MoE) layers
  int shared_intermediate = 0;  // 0: no shared expert
  int num_experts = 0, top_k = 0;
  bool routing_bias = false;
  float routed_scaling = 1.0f;
  std::vector<bool> moe_layer, sparse_layer;  // per layer
  MsaConfig msa;
  kernels::QuantScheme fp8 = kernels::QuantScheme::None;

  bool any_sparse() const;
};

// `text` is the language-model part of config.json (top level, or `text_config` of the
// multimodal wrapper); `root` is the whole file (quantization_config may sit at either level).
MiniMaxConfig parse_minimax_m3_config(const JsonConfig& root, const JsonConfig& text, const std::string& dir);
MiniMaxConfig parse_minimax_m2_config(const JsonConfig& cfg, const std::string& dir);

}  // namespace eaglet
