#include "models/eagle3_schema.h"

namespace eaglet::eagle3 {

namespace {
const std::vector<TensorSpec>& tensors() {
  static const std::vector<TensorSpec> kTensors = {
      {Tensor::Fc, "fc.weight", "fc.weight"},
      {Tensor::InputNorm, "input_norm.weight", "enc.output_norm.weight"},
      {Tensor::FcNorm0, "fc_norm.0.weight", ""},
      {Tensor::FcNorm1, "fc_norm.1.weight", ""},
      {Tensor::FcNorm2, "fc_norm.2.weight", ""},
      {Tensor::Norm, "norm.weight", "output_norm.weight"},
      {Tensor::LmHead, "lm_head.weight", "output.weight"},
      {Tensor::Embed, "embed_tokens.weight", "token_embd.weight"},
      {Tensor::D2t, "d2t", "d2t"},
      {Tensor::T2d, "t2d", ""},
      {Tensor::HiddenNorm, "hidden_norm.weight", "attn_norm_2.weight"},
  };
  return kTensors;
}
}  // namespace

Dims dims(const Eagle3Config& c) {
  Dims d;
  HfLayerSpec& spec = d.layer;
  spec.hidden = c.hidden;
  spec.in_width = 2 * spec.hidden;
  spec.intermediate = c.intermediate;
  spec.head_dim = c.head_dim;
  spec.q_dim = c.num_heads * spec.head_dim;
  spec.kv_dim = c.num_kv_heads * spec.head_dim;
  spec.qkv_bias = c.attention_bias;
  // vLLM's Llama layer has an o_proj bias with attention_bias; its Qwen3 layer never does.
  spec.o_bias = c.attention_bias && c.layer == Eagle3Layer::Llama;
  spec.qk_norm = c.layer == Eagle3Layer::Qwen3;
  d.target_hidden = c.target_hidden;
  d.vocab = c.vocab;
  d.draft_vocab = c.draft_vocab;
  return d;
}

const TensorSpec& spec(Tensor t) { return tensors()[size_t(t)]; }

std::vector<int64_t> shape(Tensor t, const Dims& d) {
  const int64_t H = d.layer.hidden;
  switch (t) {
    case Tensor::Fc: return {H, 3 * d.target_hidden};
    case Tensor::InputNorm: return {3 * d.target_hidden};
    case Tensor::FcNorm0: case Tensor::FcNorm1: case Tensor::FcNorm2: return {d.target_hidden};
    case Tensor::Norm: case Tensor::HiddenNorm: return {H};
    case Tensor::LmHead: return {d.draft_vocab, H};
    case Tensor::Embed: return {d.vocab, H};
    case Tensor::D2t: return {d.draft_vocab};
    case Tensor::T2d: return {d.vocab};
  }
  return {};
}

std::string layer_prefix(int layer, std::string_view first) {
  return layer == 0 ? std::string(first) : "layers." + std::to_string(layer) + ".";
}

std::string first_layer_prefix(const std::function<bool(const std::string&)>& has) {
  for (std::string_view p : {kMidlayer, kLayer0})
    if (has(std::string(p) + layer_tensor_name(LayerTensor::Q, Naming::HuggingFace))) return std::string(p);
  return "";
}

std::string gguf_name(const std::string& hf, std::string_view layer_prefix) {
  if (!hf.starts_with(layer_prefix)) {
    for (const TensorSpec& s : tensors())
      if (s.id != Tensor::HiddenNorm && hf == s.hf && *s.gguf) return s.gguf;
    return hf;
  }
  const std::string_view rest = std::string_view(hf).substr(layer_prefix.size());
  if (rest == spec(Tensor::HiddenNorm).hf) return std::string("blk.0.") + spec(Tensor::HiddenNorm).gguf;
  for (const LayerTensorSpec& s : layer_tensors())
    if (rest == s.hf) return std::string("blk.0.") + s.gguf;
  return hf;
}

}  // namespace eaglet::eagle3
