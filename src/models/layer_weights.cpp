#include "models/layer_weights.h"

namespace eaglet {

const std::vector<LayerTensorSpec>& layer_tensors() {
  static const std::vector<LayerTensorSpec> kTensors = {
      {LayerTensor::Q, "self_attn.q_proj.weight", "attn_q.weight"},
      {LayerTensor::K, "self_attn.k_proj.weight", "attn_k.weight"},
      {LayerTensor::V, "self_attn.v_proj.weight", "attn_v.weight"},
      {LayerTensor::O, "self_attn.o_proj.weight", "attn_output.weight"},
      {LayerTensor::Gate, "mlp.gate_proj.weight", "ffn_gate.weight"},
      {LayerTensor::Up, "mlp.up_proj.weight", "ffn_up.weight"},
      {LayerTensor::Down, "mlp.down_proj.weight", "ffn_down.weight"},
      {LayerTensor::AttnNorm, "input_layernorm.weight", "attn_norm.weight"},
      {LayerTensor::MlpNorm, "post_attention_layernorm.weight", "ffn_norm.weight"},
      {LayerTensor::QBias, "self_attn.q_proj.bias", "attn_q.bias"},
      {LayerTensor::KBias, "self_attn.k_proj.bias", "attn_k.bias"},
      {LayerTensor::VBias, "self_attn.v_proj.bias", "attn_v.bias"},
      {LayerTensor::OBias, "self_attn.o_proj.bias", "attn_output.bias"},
      {LayerTensor::QNorm, "self_attn.q_norm.weight", "attn_q_norm.weight"},
      {LayerTensor::KNorm, "self_attn.k_norm.weight", "attn_k_norm.weight"},
  };
  return kTensors;
}

const char* layer_tensor_name(LayerTensor t, Naming n) {
  const LayerTensorSpec& s = layer_tensors()[size_t(t)];
  return n == Naming::Gguf ? s.gguf : s.hf;
}

std::vector<int64_t> layer_tensor_shape(LayerTensor t, const HfLayerSpec& s) {
  switch (t) {
    case LayerTensor::Q: return {s.q_dim, s.in_width};
    case LayerTensor::K: case LayerTensor::V: return {s.kv_dim, s.in_width};
    case LayerTensor::O: return {s.hidden, s.q_dim};
    case LayerTensor::Gate: case LayerTensor::Up: return {s.intermediate, s.hidden};
    case LayerTensor::Down: return {s.hidden, s.intermediate};
    case LayerTensor::AttnNorm: case LayerTensor::MlpNorm: case LayerTensor::OBias: return {s.hidden};
    case LayerTensor::QBias: return {s.q_dim};
    case LayerTensor::KBias: case LayerTensor::VBias: return {s.kv_dim};
    case LayerTensor::QNorm: case LayerTensor::KNorm: return {s.head_dim};
  }
  return {};
}

DecoderLayerWeights read_layer(const std::string& p, const HfLayerSpec& s, Naming naming, const MatrixReader& matrix,
                               const VectorReader& vector) {
  DecoderLayerWeights L;
  auto mat = [&](LayerTensor t) {
    const auto shape = layer_tensor_shape(t, s);
    return matrix(p + layer_tensor_name(t, naming), shape[0], shape[1]);
  };
  auto vec = [&](LayerTensor t) { return vector(p + layer_tensor_name(t, naming), layer_tensor_shape(t, s)[0]); };
  L.q = mat(LayerTensor::Q);
  L.k = mat(LayerTensor::K);
  L.v = mat(LayerTensor::V);
  L.o = mat(LayerTensor::O);
  L.gate = mat(LayerTensor::Gate);
  L.up = mat(LayerTensor::Up);
  L.down = mat(LayerTensor::Down);
  L.attn_norm = vec(LayerTensor::AttnNorm);
  L.mlp_norm = vec(LayerTensor::MlpNorm);
  if (s.qkv_bias) {
    L.q_bias = vec(LayerTensor::QBias);
    L.k_bias = vec(LayerTensor::KBias);
    L.v_bias = vec(LayerTensor::VBias);
  }
  if (s.o_bias) L.o_bias = vec(LayerTensor::OBias);
  if (s.qk_norm) {
    L.q_norm = vec(LayerTensor::QNorm);
    L.k_norm = vec(LayerTensor::KNorm);
  }
  return L;
}

void add_mlp(ThreadPool& pool, const DecoderLayerWeights& l, float* x, int64_t T, int64_t hidden, float eps,
             const MlpScratch& s) {
  kernels::rmsnorm_rows(x, T, hidden, l.mlp_norm.data(), eps, s.normed);
  kernels::matmul_gated(pool, s.normed, T, l.gate, l.up, s.gate, s.up);
  kernels::matmul(pool, s.gate, T, l.down, s.tmp);
  kernels::add(x, s.tmp, T * hidden);
}

}  // namespace eaglet
