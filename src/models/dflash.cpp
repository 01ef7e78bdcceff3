#include "models/dflash.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "io/safetensors.h"

namespace eaglet {

namespace {
// z-lab's default taps when a config lists none: one layer for a one-layer draft, else spread
// from layer 1 to layer L - 3.
std::vector<int> default_target_layer_ids(int target_layers, int draft_layers) {
  if (draft_layers == 1) return {target_layers / 2};
  std::vector<int> ids;
  for (int i = 0; i < draft_layers; ++i)
    ids.push_back(int(std::lround(1 + double(i) * (target_layers - 4) / (draft_layers - 1))));
  return ids;
}

// Keys that change what a DFlash forward computes in ways eaglet does not run: refused by name
// rather than ignored.
void refuse_unsupported(const JsonConfig& top, const JsonConfig& dflash) {
  EAGLET_CHECK(!dflash.has("attention_sink_bias") && !top.get_bool("add_swa_attention_sink_bias", false),
               "{}: attention sink biases (dflash_config.attention_sink_bias) are not supported", top.where());
  for (const char* key : {"input_embedding_scale", "output_multiplier", "logit_scale"})
    for (const JsonConfig* c : {&top, &dflash})
      EAGLET_CHECK(c->get_double(key, 1.0) == 1.0, "{}: {} other than 1 is not supported", top.where(), key);
  EAGLET_CHECK(!dflash.has("final_logit_softcapping") && !top.has("final_logit_softcapping"),
               "{}: final_logit_softcapping is not supported", top.where());
}
// Which layers slide and which are causal, in vLLM's order of precedence: layer_types names the
// sliding layers (else dflash_config.use_swa makes them all slide), the window is
// dflash_config.swa_window_size or sliding_window, and causality is is_causal, else
// dflash_config.causal, else "sliding layers are causal" (how SGLang and SpecForge train and run
// them; z-lab's reference runs them both ways, llama.cpp too).
void resolve_layer_attention(const JsonConfig& top, const JsonConfig& dflash, DFlashConfig& c) {
  c.layer_attention.assign(size_t(c.num_layers), {});
  bool any = false;
  if (top.has("layer_types")) {
    const auto& types = top.raw()["layer_types"];
    EAGLET_CHECK(types.is_array() && types.size() == size_t(c.num_layers), "{}: layer_types must list {} layers",
                 top.where(), c.num_layers);
    for (size_t i = 0; i < types.size(); ++i) {
      EAGLET_CHECK(types[i] == "full_attention" || types[i] == "sliding_attention",
                   "{}: layer_types[{}] is {}: DFlash layers are full_attention or sliding_attention", top.where(), i,
                   types[i].dump());
      any |= c.layer_attention[i].sliding = types[i] == "sliding_attention";
    }
  }
  if (!any && dflash.get_bool("use_swa", false))
    for (auto& l : c.layer_attention) any = l.sliding = true;
  if (any) {
    const char* key = dflash.has("swa_window_size") ? "swa_window_size" : "sliding_window";
    const JsonConfig& from = dflash.has("swa_window_size") ? dflash : top;
    EAGLET_CHECK(from.has(key), "{}: sliding-window layers without a window (sliding_window)", top.where());
    c.sliding_window = from.get_int_in(key, 0, 1, INT32_MAX);
  }
  for (auto& l : c.layer_attention)
    l.causal = top.has("is_causal") ? top.get_bool("is_causal", false) : dflash.get_bool("causal", l.sliding);
}
}  // namespace

DFlashConfig parse_dflash_config(const JsonConfig& top, int target_layers, int target_hidden) {
  const std::string arch = top.has("architectures") && top.raw()["architectures"].is_array() &&
                                   !top.raw()["architectures"].empty()
                               ? top.raw()["architectures"][0].get<std::string>()
                               : "";
  EAGLET_CHECK(arch == "DFlashDraftModel", "{}: architectures[0] is '{}', not DFlashDraftModel", top.where(), arch);
  const JsonConfig dflash = top.has("dflash_config") ? top.sub("dflash_config") : JsonConfig(nlohmann::json::object(), top.where());
  refuse_unsupported(top, dflash);
  DFlashConfig c;
  c.hidden = top.get_size("hidden_size");
  c.target_hidden = top.get_size("target_hidden_size", target_hidden);
  c.intermediate = top.get_size("intermediate_size");
  c.num_heads = top.get_size("num_attention_heads");
  c.num_kv_heads = top.get_size("num_key_value_heads", c.num_heads);
  c.head_dim = top.get_size("head_dim", c.hidden / c.num_heads);
  c.num_layers = top.get_size("num_hidden_layers");
  c.rms_eps = float(top.get_double("rms_norm_eps", 1e-6));
  c.attention_bias = top.get_bool("attention_bias", false);
  c.block_size = top.has("block_size") ? top.get_int_in("block_size", 16, 2, kMaxTreeTokens)
                                       : dflash.get_int_in("block_size", 16, 2, kMaxTreeTokens);
  EAGLET_CHECK(dflash.has("mask_token_id"), "{}: dflash_config.mask_token_id is missing", top.where());
  c.mask_token_id = dflash.get_int_in("mask_token_id", -1, 0, INT32_MAX);
  EAGLET_CHECK(c.target_hidden == target_hidden, "{}: target_hidden_size {} but the target's hidden size is {}",
               top.where(), c.target_hidden, target_hidden);
  EAGLET_CHECK(c.hidden == target_hidden, "{}: hidden_size {} must be the target's {} (the block is embedded and "
               "scored by the target)", top.where(), c.hidden, target_hidden);
  EAGLET_CHECK(c.num_heads % c.num_kv_heads == 0, "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
               top.where(), c.num_heads, c.num_kv_heads);
  if (dflash.has("target_layer_ids")) {
    for (int64_t id : dflash.get_int_list("target_layer_ids")) c.target_layer_ids.push_back(int(id));
  } else {
    c.target_layer_ids = default_target_layer_ids(top.get_size("num_target_layers", target_layers), c.num_layers);
  }
  EAGLET_CHECK(!c.target_layer_ids.empty(), "{}: dflash_config.target_layer_ids is empty", top.where());
  EAGLET_CHECK(std::is_sorted(c.target_layer_ids.begin(), c.target_layer_ids.end()) &&
                   std::adjacent_find(c.target_layer_ids.begin(), c.target_layer_ids.end()) == c.target_layer_ids.end(),
               "{}: dflash_config.target_layer_ids must ascend", top.where());
  for (int id : c.target_layer_ids) {
    EAGLET_CHECK(id >= 0 && id < target_layers, "{}: target layer {} is outside the target's {} layers", top.where(),
                 id, target_layers);
    c.taps.push_back(id + 1);  // the output of layer id enters layer id + 1
  }
  resolve_layer_attention(top, dflash, c);
  return c;
}

nlohmann::json dflash_config_json(const DFlashConfig& c, const Rope& rope, int max_position, int target_layers,
                                  int vocab) {
  nlohmann::json j = {{"architectures", {"DFlashDraftModel"}},
          {"model_type", "qwen3"},
          {"hidden_size", c.hidden},
          {"target_hidden_size", c.target_hidden},
          {"intermediate_size", c.intermediate},
          {"num_attention_heads", c.num_heads},
          {"num_key_value_heads", c.num_kv_heads},
          {"head_dim", c.head_dim},
          {"num_hidden_layers", c.num_layers},
          {"num_target_layers", target_layers},
          {"hidden_act", "silu"},
          {"vocab_size", vocab},
          {"max_position_embeddings", max_position},
          {"rms_norm_eps", c.rms_eps},
          {"rope_theta", rope.theta},
          {"rope_scaling", rope.scaling_config},
          {"attention_bias", c.attention_bias},
          {"tie_word_embeddings", false},
          {"layer_types", std::vector<std::string>(size_t(c.num_layers), "full_attention")},
          {"block_size", c.block_size},
          {"dflash_config", {{"block_size", c.block_size}, {"mask_token_id", c.mask_token_id},
                             {"target_layer_ids", c.target_layer_ids}}}};
  for (size_t i = 0; i < c.layer_attention.size(); ++i) {
    const DFlashConfig::LayerAttention& l = c.layer_attention[i];
    if (l.sliding) j["layer_types"][i] = "sliding_attention";
    // Readers make sliding layers causal and full ones not; anything else is said (the parser
    // only ever sets one causality for all layers when it departs from that).
    if (l.causal != l.sliding) j["dflash_config"]["causal"] = l.causal;
  }
  if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
  return j;
}

std::unique_ptr<DFlashDraft> DFlashDraft::load(const std::string& path, const Model& target) {
  if (path.size() > 5 && path.ends_with(".gguf")) return load_gguf(path, target);
  const JsonConfig cfg = JsonConfig::load(path + "/config.json");
  DFlashConfig c = parse_dflash_config(cfg, target.config().num_layers, target.config().hidden);
  EAGLET_CHECK(c.mask_token_id < target.config().vocab, "{}: mask_token_id {} is outside the target's vocabulary of {}",
               cfg.where(), c.mask_token_id, target.config().vocab);
  auto ckpt = std::make_shared<Checkpoint>(Checkpoint::open_dir(path));
  std::unique_ptr<DFlashDraft> d(new DFlashDraft(c, Rope::from_config(cfg, c.head_dim), target));
  d->weights_ = WeightStore(ckpt);
  const std::set<std::string> used = d->read_weights(
      {}, [&](const std::string& name, int64_t rows, int64_t cols) { return d->weights_.matrix(name, rows, cols); },
      [&](const std::string& name, int64_t n) { return d->weights_.vector(name, n); });
  for (const std::string& n : ckpt->names())
    if (!used.count(n)) fail("{}: tensor '{}' is not used by a DFlash draft (embed_tokens, lm_head and d2t are the target's)", path, n);
  spdlog::info("DFlash draft {}: {} layers, hidden {}, block {}, mask token {}, taps of target layers {}", path,
               c.num_layers, c.hidden, c.block_size, c.mask_token_id, fmt::join(c.target_layer_ids, ","));
  return d;
}

DFlashDraft::DFlashDraft(DFlashConfig cfg, Rope rope, const Model& target)
    : cfg_(std::move(cfg)), rope_(std::move(rope)), target_(target) {
  attn_ = {cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim};
}

std::set<std::string> DFlashDraft::read_weights(const TensorNames& names, const MatrixReader& read_matrix,
                                                const VectorReader& read_vector) {
  std::set<std::string> used;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    used.insert(name);
    return read_matrix(name, rows, cols);
  };
  auto vector = [&](const std::string& name, int64_t n) {
    used.insert(name);
    return read_vector(name, n);
  };
  const int64_t H = cfg_.hidden;
  fc_ = matrix(names.fc, H, int64_t(cfg_.taps.size()) * cfg_.target_hidden);
  hidden_norm_ = vector(names.hidden_norm, H);
  norm_ = vector(names.norm, H);
  HfLayerSpec s;
  s.in_width = s.hidden = H;
  s.intermediate = cfg_.intermediate;
  s.head_dim = cfg_.head_dim;
  s.q_dim = int64_t(cfg_.num_heads) * cfg_.head_dim;
  s.kv_dim = int64_t(cfg_.num_kv_heads) * cfg_.head_dim;
  s.qkv_bias = cfg_.attention_bias;  // Qwen3: q/k/v biases only, no o_proj bias
  s.qk_norm = true;
  for (int i = 0; i < cfg_.num_layers; ++i)
    layers_.push_back(read_layer(fmt::format("{}{}.", names.layers, i), s, names.naming, matrix, vector));
  return used;
}

void DFlashDraft::quantize_weights(kernels::QuantScheme scheme) {
  std::vector<kernels::WeightView*> matrices{&fc_};
  for (DecoderLayerWeights& l : layers_) append_matrices(l, matrices);
  weights_.quantize_in_place(matrices, scheme, "--draft-quantize", "the DFlash draft");
}

std::vector<const kernels::WeightView*> DFlashDraft::matrices() const {
  std::vector<const kernels::WeightView*> out{&fc_, &target_.lm_head()};
  for (const DecoderLayerWeights& l : layers_) append_matrices(l, out);
  return out;
}

KvCacheShape DFlashDraft::kv_shape(int64_t num_blocks, int block_size) const {
  return KvCacheShape{cfg_.num_layers, cfg_.num_kv_heads, cfg_.head_dim, block_size, num_blocks};
}

void DFlashDraft::store_context(KvCache& cache, int index, const std::vector<TokenSlot>& slots, float* k,
                                const float* v) const {
  const DecoderLayerWeights& l = layers_[size_t(index)];
  kernels::rmsnorm_rows(k, int64_t(slots.size()) * cfg_.num_kv_heads, cfg_.head_dim, l.k_norm.data(), cfg_.rms_eps, k);
  apply_rope(rope_, slots, attn_, nullptr, k);
  store_kv(cache, index, slots, attn_, k, v);
}

// ctx = hidden_norm(fc(features)); each layer's k_proj / v_proj of it are the context's K/V.
void DFlashDraft::add_context(ThreadPool& pool, KvCache& cache, const std::vector<Context>& chunks) const {
  auto act = scratch_.lease();
  const int64_t H = cfg_.hidden, kvd = int64_t(cfg_.num_kv_heads) * cfg_.head_dim;
  const int64_t row = int64_t(cfg_.taps.size()) * cfg_.target_hidden;
  int64_t n = 0;
  for (const Context& c : chunks) n += c.n;
  if (n == 0) return;
  std::vector<TokenSlot>& slots = act->slots;
  slots.clear();
  float* features = act->features.get(n * row);
  for (const Context& c : chunks) {
    const int64_t start = cache.length(c.seq);
    if (!cache.reserve(c.seq, c.n)) fail("DFlash draft KV cache is full ({} blocks)", cache.total_blocks());
    std::copy_n(c.features, c.n * row, features + int64_t(slots.size()) * row);
    for (int64_t i = 0; i < c.n; ++i) slots.push_back(TokenSlot{c.seq, start + i, start + i});
  }
  float* fused = act->fused.get(n * H);
  float* ctx = act->ctx.get(n * H);
  kernels::matmul(pool, features, n, fc_, fused);
  kernels::rmsnorm_rows(fused, n, H, hidden_norm_.data(), cfg_.rms_eps, ctx);
  float* k = act->k.get(n * kvd);
  float* v = act->v.get(n * kvd);
  for (int i = 0; i < cfg_.num_layers; ++i) {
    const DecoderLayerWeights& l = layers_[size_t(i)];
    kernels::matmul(pool, ctx, n, l.k, k, l.k_bias.empty() ? nullptr : l.k_bias.data());
    kernels::matmul(pool, ctx, n, l.v, v, l.v_bias.empty() ? nullptr : l.v_bias.data());
    store_context(cache, i, slots, k, v);
  }
  for (const Context& c : chunks) cache.commit(c.seq, c.n);
}

void DFlashDraft::draft_blocks(ThreadPool& pool, KvCache& cache, const std::vector<Block>& blocks,
                               std::vector<float>* logits) const {
  auto act = scratch_.lease();
  const int64_t B = cfg_.block_size, H = cfg_.hidden, n = int64_t(blocks.size());
  // Every block token sees its sequence's whole context and whole block: one "tree" of B nodes,
  // each with every node of the block in its mask.
  const uint64_t all = B == 64 ? ~uint64_t(0) : (uint64_t(1) << B) - 1;
  std::vector<TokenSlot>& slots = act->slots;
  slots.clear();
  std::vector<int> tokens(size_t(n * B), cfg_.mask_token_id);
  std::vector<int64_t> context(static_cast<size_t>(n));  // each sequence's context length
  for (int64_t j = 0; j < n; ++j) {
    const SeqId seq = blocks[size_t(j)].seq;
    const int64_t P = context[size_t(j)] = cache.length(seq);
    if (!cache.reserve(seq, B)) fail("DFlash draft KV cache is full ({} blocks)", cache.total_blocks());
    for (int64_t i = 0; i < B; ++i) slots.push_back(TokenSlot{seq, P + i, P + i, P, all});
    tokens[size_t(j * B)] = blocks[size_t(j)].last_token;
  }
  float* x = act->x.get(n * B * H);
  target_.embed(tokens.data(), n * B, x);
  for (int i = 0; i < cfg_.num_layers; ++i) layer_forward(pool, cache, i, slots, x, *act);
  for (int64_t j = 0; j < n; ++j) {
    cache.commit(blocks[size_t(j)].seq, B);
    cache.truncate(blocks[size_t(j)].seq, context[size_t(j)]);  // the block's K/V served this forward only
  }
  // Rows 1..B-1 of each block are the drafts (row 0 holds the token already known).
  float* normed = act->normed.get(n * (B - 1) * H);
  for (int64_t j = 0; j < n; ++j)
    kernels::rmsnorm_rows(x + (j * B + 1) * H, B - 1, H, norm_.data(), cfg_.rms_eps, normed + j * (B - 1) * H);
  logits->resize(size_t(n * (B - 1) * target_.config().vocab));
  kernels::matmul(pool, normed, n * (B - 1), target_.lm_head(), logits->data());
}

const std::vector<TokenSlot>& DFlashDraft::attention_slots(int index, const std::vector<TokenSlot>& slots,
                                                           Scratch& act) const {
  if (cfg_.layer_attention.empty()) return slots;
  const DFlashConfig::LayerAttention& l = cfg_.layer_attention[size_t(index)];
  if (!l.sliding && !l.causal) return slots;
  const int64_t W = cfg_.sliding_window;
  act.seen = slots;
  for (TokenSlot& s : act.seen) {
    const int64_t i = s.row - s.tree_base;  // place in the block
    if (l.sliding) s.first_row = std::max<int64_t>(0, s.row - W + 1);
    // Block keys j <= i when causal; else (a non-causal sliding layer) those within the window on
    // either side, as vLLM widens a non-causal window.
    const int64_t last = l.causal ? i : std::min<int64_t>(cfg_.block_size - 1, i + W - 1);
    s.tree_mask &= last >= 63 ? ~uint64_t(0) : (uint64_t(2) << last) - 1;
  }
  return act.seen;
}

// A pre-norm Qwen3 layer over the block rows x [T, H], in place; its K/V join the cache at the
// slots' rows.
void DFlashDraft::layer_forward(ThreadPool& pool, KvCache& cache, int index, const std::vector<TokenSlot>& slots,
                                float* x, Scratch& act) const {
  const DecoderLayerWeights& l = layers_[size_t(index)];
  const int64_t T = int64_t(slots.size()), H = cfg_.hidden, I = cfg_.intermediate, hd = cfg_.head_dim;
  const int64_t qd = cfg_.num_heads * hd, kvd = cfg_.num_kv_heads * hd;
  float* h = act.h.get(T * H);
  float* q = act.q.get(T * qd);
  float* k = act.k.get(T * kvd);
  float* v = act.v.get(T * kvd);
  float* attn = act.attn.get(T * qd);
  float* tmp = act.tmp.get(T * H);
  kernels::rmsnorm_rows(x, T, H, l.attn_norm.data(), cfg_.rms_eps, h);
  kernels::matmul(pool, h, T, l.q, q, l.q_bias.empty() ? nullptr : l.q_bias.data());
  kernels::matmul(pool, h, T, l.k, k, l.k_bias.empty() ? nullptr : l.k_bias.data());
  kernels::matmul(pool, h, T, l.v, v, l.v_bias.empty() ? nullptr : l.v_bias.data());
  kernels::rmsnorm_rows(q, T * cfg_.num_heads, hd, l.q_norm.data(), cfg_.rms_eps, q);
  apply_rope(rope_, slots, attn_, q, nullptr);
  store_context(cache, index, slots, k, v);
  paged_attention(pool, cache, index, attention_slots(index, slots, act), attn_, q, attn);
  kernels::matmul(pool, attn, T, l.o, tmp, l.o_bias.empty() ? nullptr : l.o_bias.data());
  kernels::add(x, tmp, T * H);
  add_mlp(pool, l, x, T, H, cfg_.rms_eps, {h, act.gate.get(T * I), act.up.get(T * I), tmp});
}

}  // namespace eaglet
