#include "models/minimax/minimax_config.h"

#include "core/error.h"

namespace eaglet {

namespace {

void parse_moe(const JsonConfig& c, MiniMaxConfig* m) {
  m->num_experts = c.get_size("num_local_experts");
  m->top_k = c.get_size("num_experts_per_tok");
  EAGLET_CHECK(m->num_experts > 0 && m->top_k > 0 && m->top_k <= m->num_experts,
               "{}: num_experts_per_tok ({}) must be in [1, num_local_experts ({})]", c.where(), m->top_k, m->num_experts);
  const std::string scoring = c.get_string("scoring_func", "sigmoid");
  if (scoring != "sigmoid") fail("{}: scoring_func '{}' is not supported (only sigmoid)", c.where(), scoring);
  m->routing_bias = c.get_bool("use_routing_bias", true);
  m->routed_scaling = float(c.get_double("routed_scaling_factor", 1.0));
}

// A per-layer 0/1 list such as moe_layer_freq; a missing list means `fallback` for every layer.
std::vector<bool> layer_flags(const JsonConfig& c, const std::string& key, int layers, bool fallback) {
  std::vector<bool> out(size_t(layers), fallback);
  if (!c.has(key)) return out;
  const auto v = c.get_int_list(key);
  EAGLET_CHECK(int(v.size()) == layers, "{}: '{}' has {} entries, expected num_hidden_layers = {}", c.where(), key,
               v.size(), layers);
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] != 0;
  return out;
}

kernels::QuantScheme parse_quant(const JsonConfig& root, const JsonConfig& text) {
  const JsonConfig* src = text.has("quantization_config") ? &text : root.has("quantization_config") ? &root : nullptr;
  if (!src) return kernels::QuantScheme::None;
  const JsonConfig q = src->sub("quantization_config");
  const std::string method = q.get_string("quant_method", "");
  const auto block = q.has("weight_block_size") ? q.get_int_list("weight_block_size") : std::vector<int64_t>{};
  if (method == "mxfp8") {
    if (!block.empty() && block != std::vector<int64_t>{1, kernels::kMxGroup})
      fail("{}: mxfp8 weight_block_size must be [1, 32]", q.where());
    return kernels::QuantScheme::Mxfp8;
  }
  if (method == "fp8") {
    if (block != std::vector<int64_t>{kernels::kFp8Block, kernels::kFp8Block})
      fail("{}: fp8 weight_block_size must be [128, 128] (per-tensor FP8 is not supported)", q.where());
    return kernels::QuantScheme::Fp8Block128;
  }
  fail("{}: quant_method '{}' is not supported (fp8, mxfp8)", q.where(), method);
}

}  // namespace

bool MiniMaxConfig::any_sparse() const {
  for (bool s : sparse_layer)
    if (s) return true;
  return false;
}

MiniMaxConfig parse_minimax_m3_config(const JsonConfig& root, const JsonConfig& text, const std::string& dir) {
  MiniMaxConfig m;
  m.base = parse_model_config(text, dir);
  const int L = m.base.num_layers;
  m.gemma_norm = text.get_bool("use_gemma_norm", true);
  m.qk_norm = text.get_bool("use_qk_norm", true);
  const std::string qk_type = text.get_string("qk_norm_type", "per_head");
  if (qk_type != "per_head" && qk_type != "per_layer")
    fail("{}: qk_norm_type '{}' is not supported (per_head, per_layer)", text.where(), qk_type);
  m.qk_norm_per_head = qk_type == "per_head";
  if (text.get_bool("attention_output_gate", false))
    fail("{}: attention_output_gate is not supported", text.where());
  const std::string act = text.get_string("hidden_act", "swigluoai");
  if (act != "swigluoai" && act != "silu") fail("{}: hidden_act '{}' is not supported (swigluoai, silu)", text.where(), act);
  m.swiglu_oai = act == "swigluoai";
  m.swiglu_alpha = float(text.get_double("swiglu_alpha", 1.702));
  m.swiglu_limit = float(text.get_double("swiglu_limit", 7.0));
  m.swiglu_beta = float(text.get_double("swiglu_beta", 1.0));
  m.dense_intermediate = text.get_size("dense_intermediate_size", m.base.intermediate);
  m.shared_intermediate = text.get_int_in("shared_intermediate_size", 0, 0, INT32_MAX);
  m.shared_intermediate = text.get_int_in("n_shared_experts", 1, 0, m.shared_intermediate ? INT32_MAX / m.shared_intermediate : 1) *
                          m.shared_intermediate;
  parse_moe(text, &m);
  m.moe_layer = layer_flags(text, "moe_layer_freq", L, true);
  if (text.has("sparse_attention_config")) {
    const JsonConfig s = text.sub("sparse_attention_config");
    m.msa.index_dim = s.get_size("sparse_index_dim", 128);
    m.msa.index_heads = s.get_size("sparse_num_index_heads", m.base.num_kv_heads);
    m.msa.topk_blocks = s.get_size("sparse_topk_blocks", 16);
    m.msa.block_size = s.get_size("sparse_block_size", 128);
    m.msa.init_blocks = s.get_int_in("sparse_init_block", 0, 0, INT32_MAX);
    m.msa.local_blocks = s.get_int_in("sparse_local_block", 1, 0, INT32_MAX);
    const std::string score = s.get_string("sparse_score_type", "max");
    if (score != "max") fail("{}: sparse_score_type '{}' is not supported (max)", s.where(), score);
    m.sparse_layer = layer_flags(s, "sparse_attention_freq", L, false);
    EAGLET_CHECK(m.msa.index_heads == m.base.num_kv_heads,
                 "{}: sparse_num_index_heads ({}) must equal num_key_value_heads ({}): each index head selects "
                 "the blocks of one KV head", s.where(), m.msa.index_heads, m.base.num_kv_heads);
    EAGLET_CHECK(m.msa.block_size > 0 && m.msa.topk_blocks > 0 && m.msa.index_dim > 0 &&
                     m.msa.init_blocks >= 0 && m.msa.local_blocks >= 0 &&
                     int64_t(m.msa.init_blocks) + m.msa.local_blocks <= m.msa.topk_blocks,
                 "{}: inconsistent sparse block settings (forced blocks must fit in sparse_topk_blocks)", s.where());
  } else {
    m.sparse_layer.assign(size_t(L), false);
  }
  m.fp8 = parse_quant(root, text);
  return m;
}

MiniMaxConfig parse_minimax_m2_config(const JsonConfig& cfg, const std::string& dir) {
  MiniMaxConfig m;
  m.base = parse_model_config(cfg, dir);
  m.gemma_norm = false;
  m.qk_norm = cfg.get_bool("use_qk_norm", true);
  const std::string qk_type = cfg.get_string("qk_norm_type", "per_layer");
  if (qk_type != "per_layer" && qk_type != "per_head")
    fail("{}: qk_norm_type '{}' is not supported (per_layer, per_head)", cfg.where(), qk_type);
  m.qk_norm_per_head = qk_type == "per_head";
  const std::string act = cfg.get_string("hidden_act", "silu");
  if (act != "silu") fail("{}: hidden_act '{}' is not supported for MiniMax-M2 (silu)", cfg.where(), act);
  parse_moe(cfg, &m);
  m.moe_layer.assign(size_t(m.base.num_layers), true);
  m.sparse_layer.assign(size_t(m.base.num_layers), false);
  m.fp8 = parse_quant(cfg, cfg);
  return m;
}

}  // namespace eaglet
