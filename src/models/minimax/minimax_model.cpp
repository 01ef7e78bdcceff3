#include "models/minimax/minimax_model.h"

#include <cstring>

#include "core/error.h"
#include "models/batch_forward.h"

namespace eaglet {

MiniMaxModel::MiniMaxModel(MiniMaxConfig config, Rope rope, WeightStore weights)
    : cfg_(std::move(config)), rope_(std::move(rope)), weights_(std::move(weights)) {
  const ModelConfig& b = cfg_.base;
  attn_shape_ = {b.num_heads, b.num_kv_heads, b.head_dim};
  act_ = GatedActivation{cfg_.swiglu_oai, cfg_.swiglu_alpha, cfg_.swiglu_limit, cfg_.swiglu_beta};
  weights_.set_fp8_scheme(cfg_.fp8);
  load_weights();
}

// Gemma norms store w with the 1 taken out; folding it back in at load lets every norm share
// the plain RMSNorm kernel.
std::vector<float> MiniMaxModel::norm_weight(const std::string& name, int64_t n) {
  std::vector<float> w = weights_.vector(name, n);
  if (cfg_.gemma_norm)
    for (float& v : w) v += 1.0f;
  return w;
}

MlpWeights MiniMaxModel::load_mlp(const std::string& p, const char* gate, const char* up, const char* down,
                                  int64_t I) {
  const int64_t H = cfg_.base.hidden;
  return MlpWeights{weights_.matrix(p + gate + ".weight", I, H), weights_.matrix(p + up + ".weight", I, H),
                    weights_.matrix(p + down + ".weight", H, I)};
}

void MiniMaxModel::load_weights() {
  const ModelConfig& b = cfg_.base;
  const int64_t H = b.hidden, hd = b.head_dim, qd = int64_t(b.num_heads) * hd, kvd = int64_t(b.num_kv_heads) * hd;
  const std::string root = cfg_.prefix;
  embed_ = weights_.matrix(root + "model.embed_tokens.weight", b.vocab, H);
  lm_head_ = weights_.matrix(root + "lm_head.weight", b.vocab, H);
  final_norm_ = norm_weight(root + "model.norm.weight", H);
  cfg_.base.dtype_name = dtype_name(embed_.dtype);
  check_layer_count(numbered_layer_count(weights_.checkpoint().names(), root + "model.layers."), b.num_layers, weights_.checkpoint().where(),
                    "num_hidden_layers", root + "model.layers.");
  layers_.resize(size_t(b.num_layers));
  for (int l = 0; l < b.num_layers; ++l) {
    const std::string p = root + "model.layers." + std::to_string(l) + ".";
    MiniMaxLayer& L = layers_[size_t(l)];
    L.sparse = cfg_.sparse_layer[size_t(l)];
    L.moe = cfg_.moe_layer[size_t(l)];
    L.attn_norm = norm_weight(p + "input_layernorm.weight", H);
    L.mlp_norm = norm_weight(p + "post_attention_layernorm.weight", H);
    L.q = weights_.matrix(p + "self_attn.q_proj.weight", qd, H);
    L.k = weights_.matrix(p + "self_attn.k_proj.weight", kvd, H);
    L.v = weights_.matrix(p + "self_attn.v_proj.weight", kvd, H);
    L.o = weights_.matrix(p + "self_attn.o_proj.weight", H, qd);
    if (cfg_.qk_norm) {
      L.q_norm = norm_weight(p + "self_attn.q_norm.weight", cfg_.qk_norm_per_head ? hd : qd);
      L.k_norm = norm_weight(p + "self_attn.k_norm.weight", cfg_.qk_norm_per_head ? hd : kvd);
    }
    if (L.sparse) {
      const int64_t D = cfg_.msa.index_dim;
      L.index_q = weights_.matrix(p + "self_attn.index_q_proj.weight", int64_t(cfg_.msa.index_heads) * D, H);
      L.index_k = weights_.matrix(p + "self_attn.index_k_proj.weight", D, H);
      L.index_q_norm = norm_weight(p + "self_attn.index_q_norm.weight", D);
      L.index_k_norm = norm_weight(p + "self_attn.index_k_norm.weight", D);
    }
    if (!L.moe) {
      L.mlp = load_mlp(p + "mlp.", "gate_proj", "up_proj", "down_proj", cfg_.dense_intermediate);
      continue;
    }
    const std::string m = p + "block_sparse_moe.";
    const int E = cfg_.num_experts;
    MoeWeights& w = L.moe_weights;
    w.router = weights_.matrix(m + "gate.weight", E, H);
    if (cfg_.routing_bias) w.bias = weights_.vector(m + "e_score_correction_bias", E);
    for (int e = 0; e < E; ++e)
      w.experts.push_back(load_mlp(m + "experts." + std::to_string(e) + ".", "w1", "w3", "w2", b.intermediate));
    const std::string extra = m + "experts." + std::to_string(E) + ".w1.weight";
    if (weights_.has(extra))
      fail("{}: tensor '{}' exists but num_local_experts is {}", weights_.checkpoint().where(), extra, E);
    if (cfg_.shared_intermediate > 0) {
      w.has_shared = true;
      w.shared = load_mlp(m + "shared_experts.", "gate_proj", "up_proj", "down_proj", cfg_.shared_intermediate);
    }
  }
  if (cfg_.fp8 != kernels::QuantScheme::None)
    cfg_.base.dtype_name = cfg_.fp8 == kernels::QuantScheme::Mxfp8 ? "MXFP8" : "FP8-block";
}

KvCacheShape MiniMaxModel::kv_shape(int64_t num_blocks, int block_size) const {
  const ModelConfig& b = cfg_.base;
  KvCacheShape s{b.num_layers, b.num_kv_heads, b.head_dim, block_size, num_blocks};
  s.aux_dim = cfg_.any_sparse() ? cfg_.msa.index_dim : 0;
  return s;
}

void MiniMaxModel::embed(const int* tokens, int64_t n, float* out) const {
  kernels::embedding_rows(embed_, tokens, n, out);
}

void MiniMaxModel::final_norm(const float* x, int64_t rows, float* out) const {
  kernels::rmsnorm_rows(x, rows, cfg_.base.hidden, final_norm_.data(), cfg_.base.rms_eps, out);
}

std::vector<const kernels::WeightView*> MiniMaxModel::matrices() const {
  std::vector<const kernels::WeightView*> out = {&lm_head_};
  auto mlp = [&](const MlpWeights& m) { out.insert(out.end(), {&m.gate, &m.up, &m.down}); };
  for (const auto& L : layers_) {
    out.insert(out.end(), {&L.q, &L.k, &L.v, &L.o});
    if (L.sparse) out.insert(out.end(), {&L.index_q, &L.index_k});
    if (!L.moe) {
      mlp(L.mlp);
      continue;
    }
    out.push_back(&L.moe_weights.router);
    for (const auto& e : L.moe_weights.experts) mlp(e);
    if (L.moe_weights.has_shared) mlp(L.moe_weights.shared);
  }
  return out;
}

size_t MiniMaxModel::weight_bytes_per_token() const {
  size_t total = lm_head_.nbytes();
  for (const auto& L : layers_) {
    total += L.q.nbytes() + L.k.nbytes() + L.v.nbytes() + L.o.nbytes() + L.index_q.nbytes() + L.index_k.nbytes();
    if (!L.moe) {
      total += L.mlp.nbytes();
      continue;
    }
    const auto& w = L.moe_weights;
    total += w.router.nbytes() + (w.has_shared ? w.shared.nbytes() : 0) + size_t(cfg_.top_k) * w.experts[0].nbytes();
  }
  return total;
}

void MiniMaxModel::attention(ThreadPool& pool, Scratch& bufs, int l, KvCache& cache, const std::vector<TokenSlot>& slots, const float* xn,
                             float* out, FfnStats* stats) {
  const MiniMaxLayer& L = layers_[size_t(l)];
  const ModelConfig& b = cfg_.base;
  const int64_t T = int64_t(slots.size()), hd = b.head_dim;
  const int64_t qd = b.num_heads * hd, kvd = b.num_kv_heads * hd;
  const int64_t D = cfg_.msa.index_dim, G = cfg_.msa.index_heads;
  float* q = bufs.q.get(T * qd);
  float* k = bufs.k.get(T * kvd);
  float* v = bufs.v.get(T * kvd);
  float* iq = L.sparse ? bufs.iq.get(T * G * D) : nullptr;
  float* ik = L.sparse ? bufs.ik.get(T * D) : nullptr;
  const kernels::MatmulJob jobs[5] = {{xn, T, &L.q, q}, {xn, T, &L.k, k}, {xn, T, &L.v, v},
                                      {xn, T, &L.index_q, iq}, {xn, T, &L.index_k, ik}};
  const size_t num_jobs = L.sparse ? 5 : 3;
  kernels::matmul_grouped(pool, jobs, num_jobs);
  for (size_t j = 0; j < num_jobs; ++j) stats->weight_bytes += jobs[j].w->nbytes();
  const float eps = b.rms_eps;
  if (cfg_.qk_norm) {
    const bool ph = cfg_.qk_norm_per_head;
    kernels::rmsnorm_rows(q, ph ? T * b.num_heads : T, ph ? hd : qd, L.q_norm.data(), eps, q);
    kernels::rmsnorm_rows(k, ph ? T * b.num_kv_heads : T, ph ? hd : kvd, L.k_norm.data(), eps, k);
  }
  apply_rope(rope_, slots, attn_shape_, q, k);
  store_kv(cache, l, slots, attn_shape_, k, v);
  float* attn = bufs.attn.get(T * qd);
  if (L.sparse) {
    kernels::rmsnorm_rows(iq, T * G, D, L.index_q_norm.data(), eps, iq);
    kernels::rmsnorm_rows(ik, T, D, L.index_k_norm.data(), eps, ik);
    apply_rope(rope_, slots, AttentionShape{int(G), 1, int(D)}, iq, ik);
    store_index_keys(cache, l, slots, ik, int(D));
    msa_attention(pool, cache, l, slots, attn_shape_, cfg_.msa, q, iq, attn, msa_trace_);
  } else {
    paged_attention(pool, cache, l, slots, attn_shape_, q, attn);
  }
  kernels::matmul(pool, attn, T, L.o, out);
  stats->weight_bytes += L.o.nbytes();
}

void MiniMaxModel::layer_forward(ThreadPool& pool, Scratch& bufs, int l, KvCache& cache, const std::vector<TokenSlot>& slots, float* x,
                                 FfnStats* stats) {
  const MiniMaxLayer& L = layers_[size_t(l)];
  const int64_t T = int64_t(slots.size()), H = cfg_.base.hidden;
  float* xn = bufs.xn.get(T * H);
  float* tmp = bufs.tmp.get(T * H);
  kernels::rmsnorm_rows(x, T, H, L.attn_norm.data(), cfg_.base.rms_eps, xn);
  attention(pool, bufs, l, cache, slots, xn, tmp, stats);
  kernels::add(x, tmp, T * H);
  kernels::rmsnorm_rows(x, T, H, L.mlp_norm.data(), cfg_.base.rms_eps, xn);
  if (L.moe) moe_forward(pool, L.moe_weights, MoeRouting{cfg_.top_k, cfg_.routed_scaling}, act_, xn, T, tmp, stats);
  else mlp_forward(pool, L.mlp, act_, xn, T, tmp, stats);
  kernels::add(x, tmp, T * H);
}

void MiniMaxModel::forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, ForwardOutput* out) {
  FfnStats stats;
  out->weight_bytes_read = 0;
  auto s = scratch_.lease();
  run_forward(
      pool, *this, cache, batch,
      [&](int l, const std::vector<TokenSlot>& slots, float* x) { layer_forward(pool, *s, l, cache, slots, x, &stats); },
      s->common, out);
  out->weight_bytes_read += stats.weight_bytes;
  out->experts_touched = stats.experts_touched;
}

std::unique_ptr<Model> load_minimax(const std::string& dir, MiniMaxConfig cfg, const JsonConfig& rope_cfg) {
  WeightStore weights(std::make_shared<Checkpoint>(Checkpoint::open_dir(dir)));
  Rope rope = Rope::from_config(rope_cfg, cfg.base.head_dim);
  cfg.base.set_rope(rope);
  if (cfg.any_sparse())
    EAGLET_CHECK(rope.rot_dim <= cfg.msa.index_dim, "{}: rotary dimension {} exceeds sparse_index_dim {}",
                 rope_cfg.where(), rope.rot_dim, cfg.msa.index_dim);
  return std::make_unique<MiniMaxModel>(std::move(cfg), std::move(rope), std::move(weights));
}

}  // namespace eaglet
