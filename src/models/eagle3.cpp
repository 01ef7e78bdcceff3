#include "models/eagle3.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "models/model.h"

namespace eaglet {

Eagle3Config parse_eagle3_config(const JsonConfig& top, int target_layers, AuxNumbering numbering) {
  // speculators nests the Llama fields in transformer_layer_config; everything else is top-level.
  const bool speculators = top.has("transformer_layer_config");
  const JsonConfig layer = speculators ? top.sub("transformer_layer_config") : top;
  Eagle3Config c;
  c.hidden = layer.get_size("hidden_size");
  c.intermediate = layer.get_size("intermediate_size");
  c.num_heads = layer.get_size("num_attention_heads");
  c.num_kv_heads = layer.get_size("num_key_value_heads", c.num_heads);
  c.head_dim = layer.get_size("head_dim", c.hidden / c.num_heads);
  c.vocab = layer.has("vocab_size") ? layer.get_size("vocab_size") : top.get_size("vocab_size");
  c.rms_eps = parse_rms_norm_eps(layer);
  c.attention_bias = layer.get_bool("attention_bias", false);
  c.draft_vocab = top.get_size("draft_vocab_size", c.vocab);
  c.target_hidden = top.get_size("target_hidden_size", c.hidden);
  // vLLM reads the flavour flags from eagle_config first, then the top level.
  const bool nested = top.has("eagle_config");
  auto flag = [&](const char* key, bool fallback) {
    if (nested && top.sub("eagle_config").has(key)) return top.sub("eagle_config").get_bool(key, fallback);
    return top.get_bool(key, fallback);
  };
  c.norm_before_residual = flag("norm_before_residual", speculators);
  c.norm_before_fc = flag("norm_before_fc", false);
  c.fc_norm = flag("fc_norm", false);
  c.norm_output = flag("norm_output", false);
  const int layers = layer.get_size("num_hidden_layers", 1);
  EAGLET_CHECK(layers == 1, "{}: num_hidden_layers is {}; eaglet runs one-layer EAGLE-3 drafts (a deeper draft would "
               "run with only its first layer)", top.where(), layers);
  const std::string layer_type = layer.get_string("model_type", "llama");
  EAGLET_CHECK(layer_type == "llama" || layer_type == "eagle3" || layer_type == "speculators",
               "{}: model_type '{}': eaglet runs EAGLE-3 drafts with Llama decoder layers (a '{}' layer has other "
               "tensors and math)", layer.where(), layer_type, layer_type);
  EAGLET_CHECK(c.hidden > 0 && c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0,
               "{}: bad draft attention shape (hidden {}, heads {}, kv heads {})", top.where(), c.hidden, c.num_heads,
               c.num_kv_heads);
  EAGLET_CHECK(c.vocab > 0 && c.draft_vocab > 0, "{}: vocab_size and draft_vocab_size must be positive", top.where());
  EAGLET_CHECK(c.draft_vocab <= c.vocab, "{}: draft_vocab_size {} is larger than vocab_size {}", top.where(),
               c.draft_vocab, c.vocab);

  std::vector<int64_t> ids;
  std::string source = "default (2, L/2, L-3)";
  if (top.has("eagle_aux_hidden_state_layer_ids")) {
    ids = top.get_int_list("eagle_aux_hidden_state_layer_ids");
    source = "config eagle_aux_hidden_state_layer_ids";
  } else if (top.has("eagle_config") && top.sub("eagle_config").has("eagle_aux_hidden_state_layer_ids")) {
    ids = top.sub("eagle_config").get_int_list("eagle_aux_hidden_state_layer_ids");
    source = "config eagle_config.eagle_aux_hidden_state_layer_ids";
  }
  const bool nested_only = source.find("eagle_config.") != std::string::npos;
  if (ids.empty()) {
    ids = {2, target_layers / 2, target_layers - 3};
  } else if (numbering == AuxNumbering::Output || (numbering == AuxNumbering::Auto && nested_only && ids[0] == 1)) {
    for (auto& i : ids) i += 1;  // "output of layer i" is the input of layer i + 1
    source += numbering == AuxNumbering::Output ? " (output-of-layer numbering, +1)"
                                                : " (first id 1: output-of-layer numbering as SGLang reads it, +1)";
  }
  EAGLET_CHECK(ids.size() == 3, "{}: expected 3 aux hidden-state layer ids, got {}", top.where(), ids.size());
  for (auto i : ids)
    EAGLET_CHECK(i >= 0 && i <= target_layers, "{}: aux layer id {} is outside the target's layers [0, {}]",
                 top.where(), i, target_layers);
  for (auto i : ids) c.aux_layers.push_back(int(i));
  std::sort(c.aux_layers.begin(), c.aux_layers.end());
  spdlog::info("EAGLE-3 draft taps the target's residual stream entering layers {}, {}, {} ({})", c.aux_layers[0],
               c.aux_layers[1], c.aux_layers[2], source);
  return c;
}

nlohmann::json eagle_config_for_export(const std::vector<int>& aux) {
  nlohmann::json c = {{"use_aux_hidden_state", true}};
  if (std::all_of(aux.begin(), aux.end(), [](int j) { return j >= 1; })) {
    std::vector<int> out;
    for (int j : aux) out.push_back(j - 1);
    c["eagle_aux_hidden_state_layer_ids"] = out;
  }
  return c;
}

bool eagle3_layer_tensor(const std::string& name) {
  return name.starts_with("self_attn.") || name.starts_with("mlp.") || name.ends_with("layernorm.weight") ||
         name == "hidden_norm.weight";
}

std::unique_ptr<Eagle3Draft> Eagle3Draft::load(const std::string& path, const Model& target, AuxNumbering numbering,
                                              bool allow_unused_tensors) {
  if (is_gguf_path(path)) return load_gguf(path, target);
  const std::string& dir = path;
  JsonConfig cfg = JsonConfig::load(dir + "/config.json");
  Eagle3Config c = parse_eagle3_config(cfg, target.config().num_layers, numbering);
  auto ckpt = std::make_shared<Checkpoint>(Checkpoint::open_dir(dir));
  c.key_prefix = ckpt->has("midlayer.self_attn.q_proj.weight") ? "midlayer." : "layers.0.";
  if (!ckpt->has(c.key_prefix + "self_attn.q_proj.weight"))
    fail("{}: missing tensor 'midlayer.self_attn.q_proj.weight' (or 'layers.0.self_attn.q_proj.weight')", dir);
  const JsonConfig layer = cfg.has("transformer_layer_config") ? cfg.sub("transformer_layer_config") : cfg;
  auto draft = std::make_unique<Eagle3Draft>(c, Rope::from_config(layer, c.head_dim), WeightStore(ckpt), target);
  // A tensor the resolved flavour never reads means a flavour eaglet does not know (a Qwen3 layer's
  // q_norm, a second layer, ...): running without it would be silently wrong.
  std::vector<std::string> unused;
  for (const std::string& n : ckpt->names())
    if (!draft->used_.count(n) && n != "t2d") unused.push_back(n);  // t2d: a mask vLLM does not read either
  if (!unused.empty()) {
    const std::string msg = fmt::format("{}: tensor '{}'{} is not used by this draft's flavour", dir, unused[0],
                                        unused.size() > 1 ? fmt::format(" (and {} more)", unused.size() - 1) : "");
    if (!allow_unused_tensors) fail("{}; --allow-unused-draft-tensors loads it anyway", msg);
    spdlog::warn("{} (loaded anyway: --allow-unused-draft-tensors)", msg);
  }
  return draft;
}

Eagle3Draft::Eagle3Draft(Eagle3Config cfg, Rope rope, const Model& target, Unloaded)
    : cfg_(std::move(cfg)), rope_(std::move(rope)), target_(target) {
  attn_ = {cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim};
}

Eagle3Draft::Eagle3Draft(Eagle3Config cfg, Rope rope, WeightStore weights, const Model& target)
    : Eagle3Draft(std::move(cfg), std::move(rope), target, Unloaded{}) {
  weights_ = std::move(weights);
  Eagle3TensorSource src;
  src.where = weights_.checkpoint().where();
  auto key = [&](const std::string& name) { return eagle3_layer_tensor(name) ? cfg_.key_prefix + name : name; };
  src.has = [&](const std::string& name) { return weights_.has(key(name)); };
  src.matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    used_.insert(key(name));
    return weights_.matrix(key(name), rows, cols);
  };
  src.vector = [&](const std::string& name, int64_t n) {
    used_.insert(key(name));
    return weights_.vector(key(name), n);
  };
  src.d2t = [&](int64_t n) {
    used_.insert("d2t");
    const TensorInfo& t = weights_.checkpoint().get("d2t", {n}, {DType::I64});
    const auto* p = reinterpret_cast<const int64_t*>(t.data);
    return std::vector<int64_t>(p, p + n);
  };
  load_weights(src);
}

void Eagle3Draft::load_weights(const Eagle3TensorSource& src) {
  const auto& tc = target_.config();
  const int64_t H = cfg_.hidden, Ht = cfg_.target_hidden, I = cfg_.intermediate, hd = cfg_.head_dim;
  const int64_t qd = cfg_.num_heads * hd, kvd = cfg_.num_kv_heads * hd;
  const std::string& where = src.where;
  EAGLET_CHECK(cfg_.vocab == tc.vocab, "{}: draft vocab_size {} differs from the target's {}", where, cfg_.vocab, tc.vocab);
  EAGLET_CHECK(Ht == tc.hidden, "{}: draft target_hidden_size {} differs from the target's hidden size {}", where, Ht,
               tc.hidden);
  fc_ = src.matrix("fc.weight", H, 3 * Ht);
  q_ = src.matrix("self_attn.q_proj.weight", qd, 2 * H);
  k_ = src.matrix("self_attn.k_proj.weight", kvd, 2 * H);
  v_ = src.matrix("self_attn.v_proj.weight", kvd, 2 * H);
  o_ = src.matrix("self_attn.o_proj.weight", H, qd);
  gate_ = src.matrix("mlp.gate_proj.weight", I, H);
  up_ = src.matrix("mlp.up_proj.weight", I, H);
  down_ = src.matrix("mlp.down_proj.weight", H, I);
  input_ln_ = src.vector("input_layernorm.weight", H);
  hidden_norm_ = src.vector("hidden_norm.weight", H);
  post_ln_ = src.vector("post_attention_layernorm.weight", H);
  norm_ = src.vector("norm.weight", H);
  if (cfg_.attention_bias) {  // vLLM's Llama layer then has an o_proj bias too
    q_bias_ = src.vector("self_attn.q_proj.bias", qd);
    k_bias_ = src.vector("self_attn.k_proj.bias", kvd);
    v_bias_ = src.vector("self_attn.v_proj.bias", kvd);
    o_bias_ = src.vector("self_attn.o_proj.bias", H);
  }
  if (cfg_.norm_before_fc) input_norm_ = src.vector("input_norm.weight", 3 * Ht);
  if (cfg_.fc_norm)
    for (int i = 0; i < 3; ++i) fc_norms_[i] = src.vector("fc_norm." + std::to_string(i) + ".weight", Ht);
  if (src.has("lm_head.weight")) {
    lm_head_ = src.matrix("lm_head.weight", cfg_.draft_vocab, H);
  } else {
    EAGLET_CHECK(cfg_.draft_vocab == tc.vocab && H == tc.hidden,
                 "{}: missing tensor 'lm_head.weight' and the target's lm_head [{}, {}] does not fit the draft", where,
                 tc.vocab, tc.hidden);
    lm_head_ = target_.lm_head();
  }
  own_embed_ = src.has("embed_tokens.weight");
  if (own_embed_) embed_ = src.matrix("embed_tokens.weight", cfg_.vocab, H);
  else
    EAGLET_CHECK(H == tc.hidden, "{}: no 'embed_tokens.weight' and the target's embedding width {} differs from the "
                 "draft hidden size {}", where, tc.hidden, H);
  if (src.has("d2t")) {
    d2t_ = src.d2t(cfg_.draft_vocab);
    for (int i = 0; i < cfg_.draft_vocab; ++i)
      EAGLET_CHECK(i + d2t_[size_t(i)] >= 0 && i + d2t_[size_t(i)] < cfg_.vocab,
                   "{}: d2t[{}] = {} maps outside the target vocabulary", where, i, d2t_[size_t(i)]);
  } else if (cfg_.draft_vocab < cfg_.vocab) {
    // vLLM silently maps ids 0..Vd-1 here, a known source of near-zero acceptance.
    fail("{}: draft_vocab_size {} < vocab_size {} but the checkpoint has no 'd2t' tensor", where, cfg_.draft_vocab,
         cfg_.vocab);
  }
}

KvCacheShape Eagle3Draft::kv_shape(int64_t num_blocks, int block_size) const {
  return KvCacheShape{1, cfg_.num_kv_heads, cfg_.head_dim, block_size, num_blocks};
}

size_t Eagle3Draft::weight_bytes() const {
  return fc_.nbytes() + q_.nbytes() + k_.nbytes() + v_.nbytes() + o_.nbytes() + gate_.nbytes() + up_.nbytes() +
         down_.nbytes() + lm_head_.nbytes();
}

void Eagle3Draft::fuse_aux(ThreadPool& pool, const float* aux, int64_t n, float* g) const {
  const int64_t Ht = cfg_.target_hidden;
  std::vector<float> x(aux, aux + n * 3 * Ht);
  if (cfg_.norm_before_fc) kernels::rmsnorm_rows(x.data(), n, 3 * Ht, input_norm_.data(), cfg_.rms_eps, x.data());
  if (cfg_.fc_norm)
    for (int64_t r = 0; r < n; ++r)
      for (int i = 0; i < 3; ++i) {
        float* chunk = x.data() + (r * 3 + i) * Ht;
        kernels::rmsnorm(chunk, fc_norms_[i].data(), cfg_.rms_eps, chunk, Ht);
      }
  kernels::matmul(pool, x.data(), n, fc_, g);
}

void Eagle3Draft::forward(ThreadPool& pool, KvCache& cache, const std::vector<Eagle3Rows>& chunks, const float* g,
                          float* next_g, std::vector<float>* logits, bool all_logits) const {
  auto act = scratch_.lease();
  const int64_t H = cfg_.hidden, I = cfg_.intermediate, hd = cfg_.head_dim;
  const int64_t qd = cfg_.num_heads * hd, kvd = cfg_.num_kv_heads * hd;
  std::vector<TokenSlot>& slots = act->slots;
  std::vector<int>& tokens = act->tokens;
  slots.clear();
  tokens.clear();
  for (auto& c : chunks) {
    if (!cache.reserve(c.seq, int64_t(c.tokens.size()))) fail("draft KV cache is full ({} blocks)", cache.total_blocks());
    const int64_t start = cache.length(c.seq);
    EAGLET_CHECK(c.slots.empty() || c.slots.size() == c.tokens.size(), "draft forward: {} slots for {} tokens",
                 c.slots.size(), c.tokens.size());
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      TokenSlot slot{c.seq, start + int64_t(i), start + int64_t(i)};
      if (!c.slots.empty()) {
        slot = c.slots[i];
        slot.seq = c.seq;
        slot.row = start + int64_t(i);
      }
      slots.push_back(slot);
      tokens.push_back(c.tokens[i]);
    }
  }
  const int64_t T = int64_t(tokens.size());
  // x = [input_layernorm(embed(token)), hidden_norm(g)], embedding first.
  float* x = act->x.get(T * 2 * H);
  float* e = act->e.get(T * H);
  float* residual = act->residual.get(T * H);
  if (own_embed_) kernels::embedding_rows(embed_, tokens.data(), T, e);
  else target_.embed(tokens.data(), T, e);
  for (int64_t t = 0; t < T; ++t) {
    kernels::rmsnorm(e + t * H, input_ln_.data(), cfg_.rms_eps, x + t * 2 * H, H);
    float* h = x + t * 2 * H + H;
    kernels::rmsnorm(g + t * H, hidden_norm_.data(), cfg_.rms_eps, h, H);
    std::memcpy(residual + t * H, cfg_.norm_before_residual ? h : g + t * H, size_t(H) * sizeof(float));
  }
  float* q = act->q.get(T * qd);
  float* k = act->k.get(T * kvd);
  float* v = act->v.get(T * kvd);
  float* attn = act->attn.get(T * qd);
  float* tmp = act->tmp.get(T * H);
  kernels::matmul(pool, x, T, q_, q, q_bias_.empty() ? nullptr : q_bias_.data());
  kernels::matmul(pool, x, T, k_, k, k_bias_.empty() ? nullptr : k_bias_.data());
  kernels::matmul(pool, x, T, v_, v, v_bias_.empty() ? nullptr : v_bias_.data());
  apply_rope(rope_, slots, attn_, q, k);
  store_kv(cache, 0, slots, attn_, k, v);
  paged_attention(pool, cache, 0, slots, attn_, q, attn);
  for (auto& c : chunks) cache.commit(c.seq, int64_t(c.tokens.size()));
  kernels::matmul(pool, attn, T, o_, tmp, o_bias_.empty() ? nullptr : o_bias_.data());
  float* out = next_g;
  for (int64_t i = 0; i < T * H; ++i) out[i] = residual[i] + tmp[i];
  float* hn = act->hn.get(T * H);
  float* gt = act->gate.get(T * I);
  float* up = act->up.get(T * I);
  kernels::rmsnorm_rows(out, T, H, post_ln_.data(), cfg_.rms_eps, hn);
  kernels::matmul_gated(pool, hn, T, gate_, up_, gt, up);
  kernels::matmul(pool, gt, T, down_, tmp);
  kernels::add(out, tmp, T * H);

  int64_t num_rows = 0;
  for (auto& c : chunks) num_rows += all_logits ? int64_t(c.tokens.size()) : !c.tokens.empty();
  float* normed = act->normed.get(T * H);
  float* sel = act->sel.get(num_rows * H);
  kernels::rmsnorm_rows(out, T, H, norm_.data(), cfg_.rms_eps, normed);
  int64_t base = 0, r = 0;
  for (auto& c : chunks) {
    const int64_t n = int64_t(c.tokens.size());
    for (int64_t i = all_logits ? 0 : std::max<int64_t>(n - 1, 0); i < n; ++i, ++r)
      std::memcpy(sel + r * H, normed + (base + i) * H, size_t(H) * sizeof(float));
    base += n;
  }
  logits->resize(size_t(num_rows) * size_t(cfg_.draft_vocab));
  kernels::matmul(pool, sel, num_rows, lm_head_, logits->data());
  if (cfg_.norm_output) std::memcpy(out, normed, size_t(T * H) * sizeof(float));
}

}  // namespace eaglet
