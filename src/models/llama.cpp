// Llama 2/3: GQA, explicit head_dim, llama3 rope scaling and tied embeddings (all via the shared decoder).
#include "models/decoder.h"
#include "models/registry.h"

namespace eaglet {

void register_llama(ModelRegistry& r) {
  r.add("LlamaForCausalLM", [](const std::string& dir, const JsonConfig& cfg) {
    DecoderOptions opts;
    return load_decoder(dir, cfg, "LlamaForCausalLM", opts);
  });
}

}  // namespace eaglet
