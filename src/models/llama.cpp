// Llama 2/3: GQA, explicit head_dim, llama3 rope scaling and tied embeddings (all via the shared decoder).
#include "models/decoder.h"
#include "models/registry.h"

namespace eaglet {

void register_llama(ModelRegistry& r) {
  r.add("LlamaForCausalLM", [](const std::string& dir, const JsonConfig& cfg) {
    DecoderOptions opts;
    opts.qkv_bias = opts.o_bias = cfg.get_bool("attention_bias", false);  // as transformers' LlamaAttention
    return load_decoder(dir, cfg, "LlamaForCausalLM", opts);
  });
}

}  // namespace eaglet
