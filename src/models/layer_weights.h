// One Llama-family decoder layer's weights, its tensors' names and shapes, and reading them. The
// decoder (Llama, Qwen2, Qwen3; safetensors or GGUF) and the EAGLE-3 draft's layers share all three.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace eaglet {

class ThreadPool;

struct DecoderLayerWeights {
  kernels::WeightView q, k, v, o, gate, up, down;
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm, q_bias, k_bias, v_bias, o_bias;
};

// The layer's seven matrices appended to `out` (const or not: to name their kernels, to quantise
// them on load).
template <class Layer, class Ptr>
void append_matrices(Layer& l, std::vector<Ptr>& out) {
  out.insert(out.end(), {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down});
}

struct HfLayerSpec {
  int64_t in_width = 0;  // attention input width: hidden, or 2 * hidden for an EAGLE-3 draft's first layer
  int64_t hidden = 0, intermediate = 0, head_dim = 0, q_dim = 0, kv_dim = 0;
  bool qkv_bias = false;  // q/k/v_proj.bias (Qwen2, attention_bias)
  bool o_bias = false;    // o_proj.bias (vLLM's Llama layer with attention_bias)
  bool qk_norm = false;   // self_attn.q_norm / k_norm per head (Qwen3)
};

// A Llama-family layer's tensors, named once for Hugging Face checkpoints and llama.cpp's GGUF
// files (after the layer prefix: "model.layers.3.", "blk.3.", a draft's "midlayer.").
enum class LayerTensor { Q, K, V, O, Gate, Up, Down, AttnNorm, MlpNorm, QBias, KBias, VBias, OBias, QNorm, KNorm };
enum class Naming { HuggingFace, Gguf };
struct LayerTensorSpec {
  LayerTensor id;
  const char* hf;
  const char* gguf;
};
// Every layer tensor, in the order of LayerTensor.
const std::vector<LayerTensorSpec>& layer_tensors();
const char* layer_tensor_name(LayerTensor t, Naming n);
// Its shape in a layer of `s` ({rows, cols} or {length}).
std::vector<int64_t> layer_tensor_shape(LayerTensor t, const HfLayerSpec& s);

using MatrixReader = std::function<kernels::WeightView(const std::string& name, int64_t rows, int64_t cols)>;
using VectorReader = std::function<std::vector<float>(const std::string& name, int64_t n)>;

// The tensors of the layer under `prefix`, named as `naming` says, each read with its expected
// shape through `matrix` / `vector`.
DecoderLayerWeights read_layer(const std::string& prefix, const HfLayerSpec& s, Naming naming, const MatrixReader& matrix,
                               const VectorReader& vector);

// Caller-owned buffers for add_mlp: normed and tmp [T, hidden], gate and up [T, intermediate].
struct MlpScratch {
  float *normed, *gate, *up, *tmp;
};
// x [T, hidden] += down(silu(gate(n)) * up(n)) with n = RMSNorm(x, mlp_norm): the second half of
// every Llama-family layer (the decoder, the EAGLE-3 and DFlash drafts).
void add_mlp(ThreadPool& pool, const DecoderLayerWeights& l, float* x, int64_t T, int64_t hidden, float eps,
             const MlpScratch& s);

}  // namespace eaglet
