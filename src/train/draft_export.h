// Writes a trained draft as a Hugging Face EAGLE-3 directory that eaglet, vLLM, SGLang and
// llama.cpp's convert_hf_to_gguf.py load: config.json (LlamaForCausalLMEagle3) and
// model.safetensors with `midlayer.*` (EAGLE/SpecForge/TorchSpec) or `layers.0.*` (vLLM) keys.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/eagle3_config.h"
#include "models/rope.h"
#include "train/vocab_mapping.h"

namespace eaglet {

struct DraftExport {
  // Tensors by their checkpoint name, layer tensors under kLayerPrefix (e.g.
  // "layer.self_attn.q_proj.weight"), which the export replaces by the key style's.
  static constexpr const char* kLayerPrefix = "layer.";
  struct Tensor {
    std::vector<int64_t> shape;
    std::vector<float> data;
  };
  std::map<std::string, Tensor> tensors;
  Eagle3Config config;  // sizes, vocabularies, aux layers (eaglet/vLLM numbering)
  Rope rope;
  int max_position = 2048;
  std::string loss_mask_alignment = "torchspec";  // recorded under "eaglet_training"
  std::string rope_source = "target";              // where rope_theta came from: target | model.draft.rope_theta
  VocabMapping vocab_map;       // empty d2t when draft_vocab == vocab
};

// key_style: "midlayer" or "vllm" ("layers.0."). dtype: "float32" or "bfloat16".
void write_draft_export(const std::string& dir, const DraftExport& d, const std::string& key_style,
                        const std::string& dtype = "float32");

}  // namespace eaglet
