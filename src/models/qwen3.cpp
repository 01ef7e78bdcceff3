// Qwen3: the Llama decoder plus a per-head RMSNorm on q and k before RoPE.
#include "models/decoder.h"
#include "models/registry.h"

namespace eaglet {

void register_qwen3(ModelRegistry& r) {
  r.add("Qwen3ForCausalLM", [](const std::string& dir, const JsonConfig& cfg) {
    DecoderOptions opts;
    opts.qk_norm = true;
    opts.qkv_bias = opts.o_bias = cfg.get_bool("attention_bias", false);  // as transformers' Qwen3Attention
    return load_decoder(dir, cfg, "Qwen3ForCausalLM", opts);
  });
}

}  // namespace eaglet
