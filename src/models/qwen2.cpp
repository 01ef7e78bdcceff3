// Qwen2: the Llama decoder plus biases on the q/k/v projections.
#include "models/decoder.h"
#include "models/registry.h"

namespace eaglet {

void register_qwen2(ModelRegistry& r) {
  r.add("Qwen2ForCausalLM", [](const std::string& dir, const JsonConfig& cfg) {
    DecoderOptions opts;
    opts.qkv_bias = true;
    return load_decoder(dir, cfg, "Qwen2ForCausalLM", opts);
  });
}

}  // namespace eaglet
