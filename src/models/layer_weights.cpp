#include "models/layer_weights.h"

namespace eaglet {

DecoderLayerWeights read_hf_layer(const std::string& p, const HfLayerSpec& s, const MatrixReader& matrix,
                                  const VectorReader& vector) {
  DecoderLayerWeights L;
  L.q = matrix(p + "self_attn.q_proj.weight", s.q_dim, s.in_width);
  L.k = matrix(p + "self_attn.k_proj.weight", s.kv_dim, s.in_width);
  L.v = matrix(p + "self_attn.v_proj.weight", s.kv_dim, s.in_width);
  L.o = matrix(p + "self_attn.o_proj.weight", s.hidden, s.q_dim);
  L.gate = matrix(p + "mlp.gate_proj.weight", s.intermediate, s.hidden);
  L.up = matrix(p + "mlp.up_proj.weight", s.intermediate, s.hidden);
  L.down = matrix(p + "mlp.down_proj.weight", s.hidden, s.intermediate);
  L.attn_norm = vector(p + "input_layernorm.weight", s.hidden);
  L.mlp_norm = vector(p + "post_attention_layernorm.weight", s.hidden);
  if (s.qkv_bias) {
    L.q_bias = vector(p + "self_attn.q_proj.bias", s.q_dim);
    L.k_bias = vector(p + "self_attn.k_proj.bias", s.kv_dim);
    L.v_bias = vector(p + "self_attn.v_proj.bias", s.kv_dim);
  }
  if (s.o_bias) L.o_bias = vector(p + "self_attn.o_proj.bias", s.hidden);
  if (s.qk_norm) {
    L.q_norm = vector(p + "self_attn.q_norm.weight", s.head_dim);
    L.k_norm = vector(p + "self_attn.k_norm.weight", s.head_dim);
  }
  return L;
}

}  // namespace eaglet
