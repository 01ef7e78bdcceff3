#include <algorithm>

#include "core/error.h"
#include "io/json_config.h"
#include "models/model.h"

namespace eaglet {

ModelConfig parse_model_config(const JsonConfig& cfg, const std::string& dir) {
  ModelConfig c;
  c.dir = dir;
  c.hidden = int(cfg.get_int("hidden_size"));
  c.intermediate = int(cfg.get_int("intermediate_size"));
  c.num_layers = int(cfg.get_int("num_hidden_layers"));
  c.num_heads = int(cfg.get_int("num_attention_heads"));
  c.num_kv_heads = int(cfg.get_int("num_key_value_heads", c.num_heads));
  c.head_dim = int(cfg.get_int("head_dim", c.num_heads > 0 ? c.hidden / c.num_heads : 0));
  c.vocab = int(cfg.get_int("vocab_size"));
  c.max_position = int(std::min<int64_t>(cfg.get_int("max_position_embeddings", 4096), 1 << 30));
  c.rms_eps = float(cfg.get_double("rms_norm_eps", 1e-6));
  c.bos_token = int(cfg.get_int("bos_token_id", -1));
  if (cfg.has("eos_token_id"))
    for (auto e : cfg.get_int_list("eos_token_id")) c.eos_tokens.push_back(int(e));
  EAGLET_CHECK(c.hidden > 0 && c.num_layers > 0 && c.vocab > 0 && c.intermediate > 0,
               "{}: hidden_size, num_hidden_layers, vocab_size and intermediate_size must be positive",
               cfg.where());
  EAGLET_CHECK(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0,
               "{}: num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})",
               cfg.where(), c.num_heads, c.num_kv_heads);
  EAGLET_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "{}: head_dim {} must be positive and even",
               cfg.where(), c.head_dim);
  return c;
}

}  // namespace eaglet
