// One Llama-family decoder layer's weights, and reading them under their Hugging Face names. The
// decoder (Llama, Qwen2, Qwen3) and the EAGLE-3 draft's layers share both.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace eaglet {

struct DecoderLayerWeights {
  kernels::WeightView q, k, v, o, gate, up, down;
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm, q_bias, k_bias, v_bias, o_bias;
};

struct HfLayerSpec {
  int64_t in_width = 0;  // attention input width: hidden, or 2 * hidden for an EAGLE-3 draft's first layer
  int64_t hidden = 0, intermediate = 0, head_dim = 0, q_dim = 0, kv_dim = 0;
  bool qkv_bias = false;  // q/k/v_proj.bias (Qwen2, attention_bias)
  bool o_bias = false;    // o_proj.bias (vLLM's Llama layer with attention_bias)
  bool qk_norm = false;   // self_attn.q_norm / k_norm per head (Qwen3)
};

using MatrixReader = std::function<kernels::WeightView(const std::string& name, int64_t rows, int64_t cols)>;
using VectorReader = std::function<std::vector<float>(const std::string& name, int64_t n)>;

// The tensors of the layer under `prefix` ("model.layers.3.", a draft's "midlayer."), each read
// with its expected shape through `matrix` / `vector`.
DecoderLayerWeights read_hf_layer(const std::string& prefix, const HfLayerSpec& s, const MatrixReader& matrix,
                                  const VectorReader& vector);

}  // namespace eaglet
