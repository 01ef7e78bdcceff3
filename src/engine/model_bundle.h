// A target ready to run: the model, its tokenizer and the token ids that end generation.
#pragma once
#include <memory>
#include <string>

#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {

struct ModelBundle {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer = Tokenizer::bytes();
  std::vector<int> eos_ids;  // config.json, generation_config.json and tokenizer EOS, merged
  bool builtin = false;
  std::string label() const;  // e.g. "stories260K-hf (LlamaForCausalLM, F32)"
};

// Loads a model directory; an empty `dir` gives the built-in random model (and says so in label()).
// `quantize` re-stores the layers' matrices as GGUF blocks (Model::quantize_weights).
// `tokenizer_dir`: take the tokenizer (and chat template) from there instead (vLLM's --tokenizer).
ModelBundle load_bundle(const std::string& dir, kernels::QuantScheme quantize = kernels::QuantScheme::None,
                        const std::string& tokenizer_dir = "");

}  // namespace eaglet
