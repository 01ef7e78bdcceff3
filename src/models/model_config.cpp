#include <algorithm>

#include "core/error.h"
#include "io/json_config.h"
#include "models/model.h"

namespace eaglet {

float parse_rms_norm_eps(const JsonConfig& cfg) {
  const double eps = cfg.get_double("rms_norm_eps", 1e-6);
  // eps <= 0 divides by zero on a zero row; a negative or large one silently wrecks every norm.
  EAGLET_CHECK(eps > 0 && eps < 1, "{}: rms_norm_eps must be in (0, 1) (got {})", cfg.where(), eps);
  return float(eps);
}

int numbered_layer_count(const std::vector<std::string>& names, const std::string& prefix) {
  int64_t count = 0;
  for (auto& n : names) {
    if (!n.starts_with(prefix)) continue;
    size_t i = prefix.size(), digits = 0;
    int64_t v = 0;
    while (i < n.size() && n[i] >= '0' && n[i] <= '9' && digits < 10) v = v * 10 + (n[i++] - '0'), ++digits;
    if (digits > 0 && i < n.size() && n[i] == '.') count = std::max(count, v + 1);
  }
  return int(std::min<int64_t>(count, INT32_MAX));
}

void check_layer_count(int in_checkpoint, int in_config, const std::string& where, const std::string& field,
                       const std::string& prefix) {
  if (in_checkpoint < in_config)
    fail("{}: {} = {}, but the checkpoint holds {} layers ({}N. tensors for N < {})", where, field, in_config,
         in_checkpoint, prefix, in_checkpoint);
  if (in_checkpoint > in_config)
    fail("{}: the checkpoint holds {} layers ({}0. to {}{}.), but {} = {}: the config does not match the weights", where,
         in_checkpoint, prefix, prefix, in_checkpoint - 1, field, in_config);
}

ModelConfig parse_model_config(const JsonConfig& cfg, const std::string& dir) {
  ModelConfig c;
  c.dir = dir;
  c.hidden = cfg.get_size("hidden_size");
  c.intermediate = cfg.get_size("intermediate_size");
  c.num_layers = cfg.get_size("num_hidden_layers");
  c.num_heads = cfg.get_size("num_attention_heads");
  c.num_kv_heads = cfg.get_size("num_key_value_heads", c.num_heads);
  c.head_dim = cfg.get_size("head_dim", c.hidden / c.num_heads);
  c.vocab = cfg.get_size("vocab_size");
  c.max_position = cfg.get_size("max_position_embeddings", 4096);
  c.rms_eps = parse_rms_norm_eps(cfg);
  auto special_id = [&](const std::string& key, int64_t id) {
    EAGLET_CHECK(id >= 0 && id < c.vocab, "{}: {} {} is outside the vocabulary [0, {})", cfg.where(), key, id, c.vocab);
    return int(id);
  };
  if (cfg.has("bos_token_id")) c.bos_token = special_id("bos_token_id", cfg.get_int("bos_token_id"));
  if (cfg.has("eos_token_id"))
    for (auto e : cfg.get_int_list("eos_token_id")) c.eos_tokens.push_back(special_id("eos_token_id", e));
  EAGLET_CHECK(c.num_heads % c.num_kv_heads == 0,
               "{}: num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})",
               cfg.where(), c.num_heads, c.num_kv_heads);
  EAGLET_CHECK(c.head_dim % 2 == 0, "{}: head_dim {} must be even",
               cfg.where(), c.head_dim);
  return c;
}

void Model::quantize_weights(kernels::QuantScheme scheme) {
  if (scheme != kernels::QuantScheme::None)
    fail("--quantize: {} models cannot be quantised on load (Llama, Qwen2 and Qwen3 can)", config().architecture);
}

kernels::QuantScheme parse_quantize_option(const std::string& s, const std::string& option) {
  if (s.empty() || s == "none") return kernels::QuantScheme::None;
  if (s == "q8_0") return kernels::QuantScheme::Q8_0;
  if (s == "q4_0") return kernels::QuantScheme::Q4_0;
  if (s == "q4_k") return kernels::QuantScheme::Q4_K;
  fail("{} '{}': expected q8_0, q4_0, q4_k or none", option, s);
}

}  // namespace eaglet
