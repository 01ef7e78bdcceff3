#include "models/eagle3.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "models/eagle3_schema.h"
#include "models/model.h"

namespace eaglet {

std::unique_ptr<Eagle3Draft> Eagle3Draft::load(const std::string& path, const Model& target,
                                              const Eagle3LoadOptions& opts) {
  if (is_gguf_path(path)) return load_gguf(path, target);
  const std::string& dir = path;
  JsonConfig cfg = JsonConfig::load(dir + "/config.json");
  Eagle3Config c = parse_eagle3_config(cfg, target.config().num_layers, opts);
  auto ckpt = std::make_shared<Checkpoint>(Checkpoint::open_dir(dir));
  c.key_prefix = eagle3::first_layer_prefix([&](const std::string& n) { return ckpt->has(n); });
  if (c.key_prefix.empty()) {
    const char* q = layer_tensor_name(LayerTensor::Q, Naming::HuggingFace);
    fail("{}: missing tensor '{}{}' (or '{}{}')", dir, eagle3::kMidlayer, q, eagle3::kLayer0, q);
  }
  auto draft = std::make_unique<Eagle3Draft>(c, Rope::from_config(eagle3_layer_config(cfg), c.head_dim),
                                             WeightStore(ckpt), target);
  // A tensor the resolved flavour never reads means a flavour eaglet does not know (a second
  // layer, an MLA projection, ...): running without it would be silently wrong.
  std::vector<std::string> unused;
  for (const std::string& n : ckpt->names())
    if (!draft->used_.count(n) && n != eagle3::spec(eagle3::Tensor::T2d).hf) unused.push_back(n);  // t2d: a mask vLLM does not read either
  if (!unused.empty()) {
    const std::string msg = fmt::format("{}: tensor '{}'{} is not used by this draft's flavour ({})", dir, unused[0],
                                        unused.size() > 1 ? fmt::format(" (and {} more)", unused.size() - 1) : "",
                                        draft->cfg_.describe());
    if (!opts.allow_unused_tensors) fail("{}; --allow-unused-draft-tensors loads it anyway", msg);
    spdlog::warn("{} (loaded anyway: --allow-unused-draft-tensors)", msg);
  }
  spdlog::info("EAGLE-3 draft {}: {}", dir, draft->cfg_.describe());
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
  src.has = [&](const std::string& name) { return weights_.has(name); };
  src.matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    used_.insert(name);
    return weights_.matrix(name, rows, cols);
  };
  src.vector = [&](const std::string& name, int64_t n) {
    used_.insert(name);
    return weights_.vector(name, n);
  };
  src.d2t = [&](int64_t n) {
    const char* name = eagle3::spec(eagle3::Tensor::D2t).hf;
    used_.insert(name);
    const TensorInfo& t = weights_.checkpoint().get(name, {n}, {DType::I64});
    const auto* p = reinterpret_cast<const int64_t*>(t.data);
    return std::vector<int64_t>(p, p + n);
  };
  load_weights(src);
}

void Eagle3Draft::load_weights(const Eagle3TensorSource& src) {
  using eagle3::Tensor;
  const auto& tc = target_.config();
  const std::string& where = src.where;
  EAGLET_CHECK(cfg_.vocab == tc.vocab, "{}: draft vocab_size {} differs from the target's {}", where, cfg_.vocab, tc.vocab);
  EAGLET_CHECK(cfg_.target_hidden == tc.hidden, "{}: draft target_hidden_size {} differs from the target's hidden size {}",
               where, cfg_.target_hidden, tc.hidden);
  const eagle3::Dims d = eagle3::dims(cfg_);
  auto vec = [&](Tensor t) { return src.vector(eagle3::spec(t).hf, eagle3::shape(t, d)[0]); };
  const auto fc = eagle3::shape(Tensor::Fc, d);
  fc_ = src.matrix(eagle3::spec(Tensor::Fc).hf, fc[0], fc[1]);
  load_layers(src, d);
  norm_ = vec(Tensor::Norm);
  if (cfg_.norm_before_fc) input_norm_ = vec(Tensor::InputNorm);
  if (cfg_.fc_norm)
    for (int i = 0; i < 3; ++i) fc_norms_[i] = vec(Tensor(int(Tensor::FcNorm0) + i));
  load_vocab(src, d);
}

void Eagle3Draft::load_layers(const Eagle3TensorSource& src, const eagle3::Dims& d) {
  const std::string hidden_norm = eagle3::spec(eagle3::Tensor::HiddenNorm).hf;
  const int64_t H = d.layer.hidden;
  HfLayerSpec spec = d.layer;
  for (int i = 0; i < cfg_.num_layers; ++i) {
    const std::string p = eagle3::layer_prefix(i, cfg_.key_prefix);
    spec.in_width = i == 0 ? 2 * H : H;
    layers_.push_back(read_layer(p, spec, Naming::HuggingFace, src.matrix, src.vector));
    if (i == 0) hidden_norm_ = src.vector(p + hidden_norm, H);
    // vLLM builds a hidden_norm in every layer but only the first applies it: a later layer's is
    // read (so strict loading accepts it) and never used.
    else if (src.has(p + hidden_norm)) src.vector(p + hidden_norm, H);
  }
}

// The output head, the embedding (each the draft's own or the target's) and the vocabulary map.
void Eagle3Draft::load_vocab(const Eagle3TensorSource& src, const eagle3::Dims& d) {
  using eagle3::Tensor;
  const auto& tc = target_.config();
  const std::string& where = src.where;
  const int64_t H = d.layer.hidden;
  const std::string head = eagle3::spec(Tensor::LmHead).hf, embed = eagle3::spec(Tensor::Embed).hf;
  if (src.has(head)) {
    lm_head_ = src.matrix(head, cfg_.draft_vocab, H);
  } else {
    EAGLET_CHECK(cfg_.draft_vocab == tc.vocab && H == tc.hidden,
                 "{}: missing tensor '{}' and the target's lm_head [{}, {}] does not fit the draft", where, head,
                 tc.vocab, tc.hidden);
    lm_head_ = target_.lm_head();
  }
  cfg_.resolved.emplace_back("lm_head", lm_head_.data == target_.lm_head().data ? "target's" : "own");
  own_embed_ = src.has(embed);
  cfg_.resolved.emplace_back("embed_tokens", own_embed_ ? "own" : "target's");
  if (own_embed_) embed_ = src.matrix(embed, cfg_.vocab, H);
  else
    EAGLET_CHECK(H == tc.hidden, "{}: no '{}' and the target's embedding width {} differs from the draft hidden size {}",
                 where, embed, tc.hidden, H);
  if (src.has(eagle3::spec(Tensor::D2t).hf)) {
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
  return KvCacheShape{cfg_.num_layers, cfg_.num_kv_heads, cfg_.head_dim, block_size, num_blocks};
}

void Eagle3Draft::quantize_weights(kernels::QuantScheme scheme) {
  std::vector<kernels::WeightView*> matrices{&fc_};
  if (lm_head_.data != target_.lm_head().data) matrices.push_back(&lm_head_);
  for (DecoderLayerWeights& l : layers_) append_matrices(l, matrices);
  weights_.quantize_in_place(matrices, scheme, "--draft-quantize", "the EAGLE-3 draft");
}

std::vector<const kernels::WeightView*> Eagle3Draft::matrices() const {
  std::vector<const kernels::WeightView*> out{&fc_, &lm_head_};
  for (const DecoderLayerWeights& l : layers_) append_matrices(l, out);
  return out;
}

size_t Eagle3Draft::weight_bytes() const {
  size_t n = fc_.nbytes() + lm_head_.nbytes();
  for (const DecoderLayerWeights& l : layers_)
    n += l.q.nbytes() + l.k.nbytes() + l.v.nbytes() + l.o.nbytes() + l.gate.nbytes() + l.up.nbytes() + l.down.nbytes();
  return n;
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
  const int64_t H = cfg_.hidden;
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
  // Layer 0 reads x = [input_layernorm(embed(token)), hidden_norm(g)], embedding first.
  float* x = act->x.get(T * 2 * H);
  float* e = act->e.get(T * H);
  float* residual = act->residual.get(T * H);
  const DecoderLayerWeights& first = layers_[0];
  if (own_embed_) kernels::embedding_rows(embed_, tokens.data(), T, e);
  else target_.embed(tokens.data(), T, e);
  for (int64_t t = 0; t < T; ++t) {
    kernels::rmsnorm(e + t * H, first.attn_norm.data(), cfg_.rms_eps, x + t * 2 * H, H);
    float* h = x + t * 2 * H + H;
    kernels::rmsnorm(g + t * H, hidden_norm_.data(), cfg_.rms_eps, h, H);
    std::memcpy(residual + t * H, cfg_.norm_before_residual ? h : g + t * H, size_t(H) * sizeof(float));
  }
  float* out = next_g;
  layer_forward(pool, cache, 0, slots, x, 2 * H, residual, out, *act);
  for (int i = 1; i < cfg_.num_layers; ++i) {
    kernels::rmsnorm_rows(out, T, H, layers_[size_t(i)].attn_norm.data(), cfg_.rms_eps, x);
    layer_forward(pool, cache, i, slots, x, H, out, out, *act);
  }
  for (auto& c : chunks) cache.commit(c.seq, int64_t(c.tokens.size()));

  int64_t num_rows = 0;
  for (auto& c : chunks) num_rows += all_logits ? int64_t(c.tokens.size()) : !c.tokens.empty();
  float* normed = act->normed.get(T * H);
  float* sel = act->sel.get(num_rows * H);
  kernels::rmsnorm_rows(out, T, H, norm_.data(), cfg_.rms_eps, normed);
  const float* head_in = cfg_.lm_head_reads_norm() ? normed : out;  // out: SpecForge-legacy without norm_output
  int64_t base = 0, r = 0;
  for (auto& c : chunks) {
    const int64_t n = int64_t(c.tokens.size());
    for (int64_t i = all_logits ? 0 : std::max<int64_t>(n - 1, 0); i < n; ++i, ++r)
      std::memcpy(sel + r * H, head_in + (base + i) * H, size_t(H) * sizeof(float));
    base += n;
  }
  logits->resize(size_t(num_rows) * size_t(cfg_.draft_vocab));
  kernels::matmul(pool, sel, num_rows, lm_head_, logits->data());
  if (cfg_.feeds_back_norm()) std::memcpy(out, normed, size_t(T * H) * sizeof(float));
}

void Eagle3Draft::layer_forward(ThreadPool& pool, KvCache& cache, int index, const std::vector<TokenSlot>& slots,
                                const float* x, int64_t in_width, const float* residual, float* out,
                                Scratch& act) const {
  const DecoderLayerWeights& l = layers_[size_t(index)];
  const int64_t T = int64_t(slots.size()), H = cfg_.hidden, I = cfg_.intermediate, hd = cfg_.head_dim;
  const int64_t qd = cfg_.num_heads * hd, kvd = cfg_.num_kv_heads * hd;
  EAGLET_CHECK(l.q.cols == in_width, "draft layer {}: input width {} != {}", index, in_width, l.q.cols);
  float* q = act.q.get(T * qd);
  float* k = act.k.get(T * kvd);
  float* v = act.v.get(T * kvd);
  float* attn = act.attn.get(T * qd);
  float* tmp = act.tmp.get(T * H);
  kernels::matmul(pool, x, T, l.q, q, l.q_bias.empty() ? nullptr : l.q_bias.data());
  kernels::matmul(pool, x, T, l.k, k, l.k_bias.empty() ? nullptr : l.k_bias.data());
  kernels::matmul(pool, x, T, l.v, v, l.v_bias.empty() ? nullptr : l.v_bias.data());
  if (!l.q_norm.empty()) {  // Qwen3 layer: RMSNorm over each head's q and k, before RoPE
    kernels::rmsnorm_rows(q, T * cfg_.num_heads, hd, l.q_norm.data(), cfg_.rms_eps, q);
    kernels::rmsnorm_rows(k, T * cfg_.num_kv_heads, hd, l.k_norm.data(), cfg_.rms_eps, k);
  }
  apply_rope(rope_, slots, attn_, q, k);
  store_kv(cache, index, slots, attn_, k, v);
  paged_attention(pool, cache, index, slots, attn_, q, attn);
  kernels::matmul(pool, attn, T, l.o, tmp, l.o_bias.empty() ? nullptr : l.o_bias.data());
  for (int64_t i = 0; i < T * H; ++i) out[i] = residual[i] + tmp[i];
  add_mlp(pool, l, out, T, H, cfg_.rms_eps, {act.hn.get(T * H), act.gate.get(T * I), act.up.get(T * I), tmp});
}

}  // namespace eaglet
