#include "models/decoder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ggml_interleave.h"

namespace eaglet {

ModelConfig DecoderModel::parse_config(const JsonConfig& cfg, const std::string& dir) {
  ModelConfig c = parse_model_config(cfg, dir);
  if (cfg.has("hidden_act") && cfg.get_string("hidden_act", "") != "silu")
    fail("{}: hidden_act '{}' is not supported (only silu)", cfg.where(), cfg.get_string("hidden_act", ""));
  if (cfg.get_bool("mlp_bias", false)) fail("{}: mlp_bias is not supported (the MLP projections have no bias here)", cfg.where());
  return c;
}

DecoderModel::DecoderModel(ModelConfig config, DecoderOptions opts, Rope rope, WeightStore weights)
    : cfg_(std::move(config)), opts_(opts), rope_(std::move(rope)), weights_(std::move(weights)) {
  attn_shape_ = {cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim};
  load_weights();
}

DecoderModel::DecoderModel(ModelConfig config, DecoderOptions opts, Rope rope, WeightStore weights,
                           kernels::WeightView embed, kernels::WeightView lm_head,
                           std::vector<float> final_norm, std::vector<DecoderLayerWeights> layers)
    : cfg_(std::move(config)), opts_(opts), rope_(std::move(rope)), weights_(std::move(weights)),
      embed_(embed), lm_head_(lm_head), final_norm_(std::move(final_norm)), layers_(std::move(layers)) {
  attn_shape_ = {cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim};
}

void DecoderModel::load_weights() {
  const int64_t H = cfg_.hidden, I = cfg_.intermediate, hd = cfg_.head_dim;
  const int64_t qd = cfg_.num_heads * hd, kvd = cfg_.num_kv_heads * hd;
  embed_ = weights_.matrix("model.embed_tokens.weight", cfg_.vocab, H);
  if (opts_.tie_embeddings && !weights_.has("lm_head.weight")) lm_head_ = embed_;
  else lm_head_ = weights_.matrix("lm_head.weight", cfg_.vocab, H);
  final_norm_ = weights_.vector("model.norm.weight", H);
  cfg_.dtype_name = dtype_name(embed_.dtype);
  check_layer_count(numbered_layer_count(weights_.checkpoint().names(), "model.layers."), cfg_.num_layers, weights_.checkpoint().where(),
                    "num_hidden_layers", "model.layers.");
  layers_.resize(size_t(cfg_.num_layers));
  HfLayerSpec spec;
  spec.in_width = spec.hidden = H;
  spec.intermediate = I;
  spec.head_dim = hd;
  spec.q_dim = qd;
  spec.kv_dim = kvd;
  spec.qkv_bias = opts_.qkv_bias;
  spec.o_bias = opts_.o_bias;
  spec.qk_norm = opts_.qk_norm;
  for (int l = 0; l < cfg_.num_layers; ++l) {
    layers_[size_t(l)] = read_layer(
        "model.layers." + std::to_string(l) + ".", spec, Naming::HuggingFace,
        [&](const std::string& n, int64_t rows, int64_t cols) { return weights_.matrix(n, rows, cols); },
        [&](const std::string& n, int64_t len) { return weights_.vector(n, len); });
    cfg_.dtype_name = dtype_name(layers_[size_t(l)].q.dtype);
  }
}

KvCacheShape DecoderModel::kv_shape(int64_t num_blocks, int block_size) const {
  return KvCacheShape{cfg_.num_layers, cfg_.num_kv_heads, cfg_.head_dim, block_size, num_blocks};
}

void DecoderModel::embed(const int* tokens, int64_t n, float* out) const {
  kernels::embedding_rows(embed_, tokens, n, out);
}

void DecoderModel::final_norm(const float* x, int64_t rows, float* out) const {
  kernels::rmsnorm_rows(x, rows, cfg_.hidden, final_norm_.data(), cfg_.rms_eps, out);
}

size_t DecoderModel::weight_bytes_per_token() const {
  size_t total = lm_head_.nbytes();
  for (auto& L : layers_)
    total += L.q.nbytes() + L.k.nbytes() + L.v.nbytes() + L.o.nbytes() + L.gate.nbytes() +
             L.up.nbytes() + L.down.nbytes();
  return total;
}

std::vector<const kernels::WeightView*> DecoderModel::matrices() const {
  std::vector<const kernels::WeightView*> out = {&lm_head_};
  for (auto& L : layers_) append_matrices(L, out);
  return out;
}

void DecoderModel::quantize_weights(kernels::QuantScheme scheme) {
  if (scheme == kernels::QuantScheme::None) return;
  std::vector<kernels::WeightView*> matrices;
  for (auto& L : layers_) append_matrices(L, matrices);
  const int kept = weights_.quantize_in_place(matrices, scheme, "--quantize", "the target's layers");
  const char* name = kernels::ggml_type_info(uint32_t(kernels::ggml_type_of(scheme)))->name;
  cfg_.dtype_name = kept ? cfg_.dtype_name + "+" + name : name;
}

void DecoderModel::layer_forward(ThreadPool& pool, Scratch& act, int l, KvCache& cache,
                                 const std::vector<TokenSlot>& slots, float* x) {
  const auto& L = layers_[size_t(l)];
  const int64_t T = int64_t(slots.size()), H = cfg_.hidden, I = cfg_.intermediate, hd = cfg_.head_dim;
  const int64_t qd = cfg_.num_heads * hd, kvd = cfg_.num_kv_heads * hd;
  float* xn = act.xn.get(T * H);
  float* q = act.q.get(T * qd);
  float* k = act.k.get(T * kvd);
  float* v = act.v.get(T * kvd);
  float* attn = act.attn.get(T * qd);
  float* tmp = act.tmp.get(T * H);
  kernels::rmsnorm_rows(x, T, H, L.attn_norm.data(), cfg_.rms_eps, xn);
  // q, k and v (and below gate and up, with the activation) in one fork-join each: fewer thread
  // synchronisations per layer, and every thread streams its share of the matrices back to back.
  const kernels::MatmulJob qkv[3] = {{xn, T, &L.q, q}, {xn, T, &L.k, k}, {xn, T, &L.v, v}};
  kernels::matmul_grouped(pool, qkv, 3);
  if (opts_.qkv_bias)
    for (int64_t t = 0; t < T; ++t) {
      kernels::add(q + t * qd, L.q_bias.data(), qd);
      kernels::add(k + t * kvd, L.k_bias.data(), kvd);
      kernels::add(v + t * kvd, L.v_bias.data(), kvd);
    }
  if (opts_.qk_norm) {
    kernels::rmsnorm_rows(q, T * cfg_.num_heads, hd, L.q_norm.data(), cfg_.rms_eps, q);
    kernels::rmsnorm_rows(k, T * cfg_.num_kv_heads, hd, L.k_norm.data(), cfg_.rms_eps, k);
  }
  apply_rope(rope_, slots, attn_shape_, q, k);
  store_kv(cache, l, slots, attn_shape_, k, v);
  paged_attention(pool, cache, l, slots, attn_shape_, q, attn);
  kernels::matmul(pool, attn, T, L.o, tmp, L.o_bias.empty() ? nullptr : L.o_bias.data());
  kernels::add(x, tmp, T * H);

  add_mlp(pool, L, x, T, H, cfg_.rms_eps, {xn, act.gate.get(T * I), act.up.get(T * I), tmp});
}

void DecoderModel::forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, ForwardOutput* out) {
  out->weight_bytes_read = weight_bytes_per_token() - lm_head_.nbytes();  // the lm_head is added per row set
  out->experts_touched = 0;
  auto s = scratch_.lease();
  run_forward(
      pool, *this, cache, batch,
      [&](int l, const std::vector<TokenSlot>& slots, float* x) { layer_forward(pool, *s, l, cache, slots, x); },
      s->common, out);
}

}  // namespace eaglet

namespace eaglet {
std::unique_ptr<Model> load_decoder(const std::string& dir, const JsonConfig& cfg,
                                    const std::string& architecture, DecoderOptions opts) {
  ModelConfig mc = DecoderModel::parse_config(cfg, dir);
  mc.architecture = architecture;
  opts.tie_embeddings = cfg.get_bool("tie_word_embeddings", false);
  WeightStore weights(std::make_shared<Checkpoint>(Checkpoint::open_dir(dir)));
  Rope rope = Rope::from_config(cfg, mc.head_dim);
  mc.set_rope(rope);
  return std::make_unique<DecoderModel>(mc, opts, std::move(rope), std::move(weights));
}
}  // namespace eaglet
