#include "train/dflash_module.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"

namespace eaglet {

RmsNormImpl::RmsNormImpl(int64_t n, double eps) : eps(eps) { weight = register_parameter("weight", torch::ones({n})); }

DFlashAttentionImpl::DFlashAttentionImpl(const DFlashConfig& c) {
  using torch::nn::LinearOptions;
  const int64_t H = c.hidden, qd = int64_t(c.num_heads) * c.head_dim, kvd = int64_t(c.num_kv_heads) * c.head_dim;
  // Qwen3's attention_bias puts biases on q, k and v only, as the engine reads them.
  q_proj = register_module("q_proj", torch::nn::Linear(LinearOptions(H, qd).bias(c.attention_bias)));
  k_proj = register_module("k_proj", torch::nn::Linear(LinearOptions(H, kvd).bias(c.attention_bias)));
  v_proj = register_module("v_proj", torch::nn::Linear(LinearOptions(H, kvd).bias(c.attention_bias)));
  o_proj = register_module("o_proj", torch::nn::Linear(LinearOptions(qd, H).bias(false)));
  q_norm = register_module("q_norm", RmsNorm(c.head_dim, c.rms_eps));
  k_norm = register_module("k_norm", RmsNorm(c.head_dim, c.rms_eps));
}

DFlashMlpImpl::DFlashMlpImpl(const DFlashConfig& c) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(c.hidden, c.intermediate).bias(false)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(c.hidden, c.intermediate).bias(false)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(c.intermediate, c.hidden).bias(false)));
}

DFlashLayerImpl::DFlashLayerImpl(const DFlashConfig& c, int index)
    : cfg(c), attention(c.layer_attention.empty() ? DFlashConfig::LayerAttention{} : c.layer_attention.at(size_t(index))) {
  input_layernorm = register_module("input_layernorm", RmsNorm(c.hidden, c.rms_eps));
  self_attn = register_module("self_attn", DFlashAttention(c));
  post_attention_layernorm = register_module("post_attention_layernorm", RmsNorm(c.hidden, c.rms_eps));
  mlp = register_module("mlp", DFlashMlp(c));
}

// Context keys a block row does not see: those at or after its anchor, and in a sliding layer
// those more than W - 1 positions before the row.
torch::Tensor DFlashLayerImpl::context_hidden(const BlockLayout& l, int64_t T) const {
  auto seen = l.ctx_visible;
  if (attention.sliding)
    seen = seen.logical_and(torch::arange(T, l.row_pos.options()).view({1, 1, 1, T}) > l.row_pos - cfg.sliding_window);
  return seen.logical_not();
}

// [S, S]: block key j hidden from block row i. Causal: j > i; a non-causal sliding layer sees the
// window on both sides (j < i + W), as vLLM widens it; sliding: j > i - W.
torch::Tensor DFlashLayerImpl::block_hidden(int64_t S) const {
  auto i = torch::arange(S, torch::kLong).view({S, 1}), j = torch::arange(S, torch::kLong).view({1, S});
  const int64_t W = cfg.sliding_window;
  auto seen = attention.causal ? j <= i : attention.sliding ? j < i + W : torch::ones({S, S}, torch::kBool);
  if (attention.sliding) seen = seen.logical_and(j > i - W);
  return seen.logical_not();
}

torch::Tensor DFlashLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& ctx, const BlockLayout& l) {
  const int64_t Bt = x.size(0), N = x.size(1), T = ctx.size(1), A = l.blocks, S = l.size;
  const int64_t nh = cfg.num_heads, nkv = cfg.num_kv_heads, hd = cfg.head_dim;
  DFlashAttentionImpl& at = *self_attn;
  // [Bt, rows, n * hd] -> [Bt, nh, rows, hd], per-head RMS-normed when `norm` is given, GQA
  // groups repeated up to the query heads.
  auto heads = [&](const torch::Tensor& t, int64_t n, RmsNorm* norm) {
    auto v = t.view({Bt, t.size(1), n, hd});
    if (norm) v = (*norm)(v);
    v = v.transpose(1, 2);
    return n == nh ? v : v.repeat_interleave(nh / n, 1);
  };
  auto h = input_layernorm(x);
  // Queries and the block's own keys at the block positions; the context's keys, from the fused
  // features without a layer norm (as the engine stores them), at positions 0..T-1.
  auto q = rotate(heads(at.q_proj(h), nh, &at.q_norm), l.block_cos, l.block_sin);
  auto kb = rotate(heads(at.k_proj(h), nkv, &at.k_norm), l.block_cos, l.block_sin);
  auto vb = heads(at.v_proj(h), nkv, nullptr);
  auto kc = rotate(heads(at.k_proj(ctx), nkv, &at.k_norm), l.ctx_cos, l.ctx_sin);
  auto vc = heads(at.v_proj(ctx), nkv, nullptr);
  const double scale = 1.0 / std::sqrt(double(hd));
  // Scores against the context [.., N, T] and within each block [.., N, B]: the block-diagonal
  // part of the full mask is never materialised. The in-block products are broadcasts, not
  // batched matmuls: thousands of B x B GEMMs cost far more in per-call overhead than they compute.
  auto s_ctx = torch::matmul(q, kc.transpose(-1, -2)).mul(scale).masked_fill(context_hidden(l, T), -INFINITY);
  auto s_blk = (q.reshape({Bt, nh, A, S, 1, hd}) * kb.reshape({Bt, nh, A, 1, S, hd})).sum(-1).mul(scale);
  if (attention.sliding || attention.causal) s_blk = s_blk.masked_fill(block_hidden(S), -INFINITY);
  s_blk = s_blk.view({Bt, nh, N, S});
  auto p = torch::softmax(torch::cat({s_ctx, s_blk}, -1).to(torch::kFloat32), -1).to(q.scalar_type());
  auto in_block = (p.narrow(-1, T, S).reshape({Bt, nh, A, S, S, 1}) * vb.reshape({Bt, nh, A, 1, S, hd})).sum(-2);
  auto out = torch::matmul(p.narrow(-1, 0, T), vc) + in_block.view({Bt, nh, N, hd});
  auto x1 = x + at.o_proj(out.transpose(1, 2).reshape({Bt, N, nh * hd}));
  return x1 + mlp(post_attention_layernorm(x1));
}

DFlashModuleImpl::DFlashModuleImpl(const DFlashModuleOptions& o) : opts(o) {
  const DFlashConfig& c = opts.config;
  fc = register_module("fc", torch::nn::Linear(
                                 torch::nn::LinearOptions(int64_t(c.taps.size()) * c.target_hidden, c.hidden).bias(false)));
  hidden_norm = register_module("hidden_norm", RmsNorm(c.hidden, c.rms_eps));
  norm = register_module("norm", RmsNorm(c.hidden, c.rms_eps));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int i = 0; i < c.num_layers; ++i) layers->push_back(DFlashLayer(c, i));
  EAGLET_CHECK(int64_t(opts.rope.inv_freq.size()) * 2 == c.head_dim, "DFlash draft RoPE: {} frequencies for head_dim {}",
               opts.rope.inv_freq.size(), c.head_dim);
  inv_freq = register_buffer("inv_freq", torch::tensor(opts.rope.inv_freq, torch::kFloat32));
}

torch::Tensor DFlashModuleImpl::context(const torch::Tensor& features) { return hidden_norm(fc(features)); }

torch::Tensor DFlashModuleImpl::forward(const torch::Tensor& ctx, const torch::Tensor& first, const torch::Tensor& anchors) {
  const DFlashConfig& c = opts.config;
  const int64_t Bt = first.size(0), A = first.size(1), S = c.block_size, N = A * S, T = ctx.size(1), H = c.hidden;
  auto slot = torch::arange(S, anchors.options());
  auto tokens = torch::full({Bt, A, S}, int64_t(c.mask_token_id), anchors.options());
  tokens.select(2, 0).copy_(first);
  auto x = embed.index_select(0, tokens.reshape({-1})).view({Bt, N, H});
  BlockLayout l;
  l.blocks = A;
  l.size = S;
  l.row_pos = (anchors.unsqueeze(-1) + slot).view({Bt, 1, N, 1});
  std::tie(l.block_cos, l.block_sin) = rope_angles(opts.rope, inv_freq, l.row_pos.view({Bt, 1, N}));
  std::tie(l.ctx_cos, l.ctx_sin) = rope_angles(opts.rope, inv_freq, torch::arange(T, anchors.options()));
  l.ctx_visible = (torch::arange(T, anchors.options()).view({1, 1, T}) < anchors.unsqueeze(-1))  // [Bt, A, T]
                      .unsqueeze(2).expand({Bt, A, S, T}).reshape({Bt, 1, N, T});
  for (const auto& layer : *layers) x = layer->as<DFlashLayer>()->forward(x, ctx, l);
  auto out = norm(x).view({Bt, A, S, H}).narrow(2, 1, S - 1);
  return torch::matmul(out, lm_head.t());
}

Anchors draw_anchors(const TttBatch& b, int max_per_sequence, const std::vector<uint64_t>* seeds) {
  const int64_t Bt = b.ids.size(0), T = b.ids.size(1);
  // a is eligible when a >= 1 and a and a + 1 are real, supervised tokens: a is then a token the
  // target produced, the last verified token of some step when serving.
  auto sup = b.loss_mask * real_tokens(b);
  auto next_ok = (sup.narrow(1, 0, T - 1) * sup.narrow(1, 1, T - 1)) > 0;  // [Bt, T - 1]: index a
  next_ok.select(1, 0).fill_(false);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(Bt));
  size_t A = 1;
  for (int64_t i = 0; i < Bt; ++i) {
    auto eligible = next_ok[i].nonzero().view({-1});
    if (seeds && eligible.numel() > max_per_sequence) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>((*seeds)[size_t(i)]);
      auto pick = torch::randperm(eligible.numel(), gen, torch::kLong).narrow(0, 0, max_per_sequence);
      eligible = std::get<0>(eligible.index_select(0, pick).sort());
    }
    rows[size_t(i)].assign(eligible.data_ptr<int64_t>(), eligible.data_ptr<int64_t>() + eligible.numel());
    A = std::max(A, rows[size_t(i)].size());
  }
  std::vector<int64_t> pos(size_t(Bt) * A, 0);
  std::vector<uint8_t> real(size_t(Bt) * A, 0);
  for (size_t i = 0; i < size_t(Bt); ++i) {
    std::copy(rows[i].begin(), rows[i].end(), pos.begin() + ptrdiff_t(i * A));
    std::fill_n(real.begin() + ptrdiff_t(i * A), rows[i].size(), 1);
  }
  return {torch::tensor(pos, torch::kLong).view({Bt, int64_t(A)}),
          torch::tensor(real, torch::kUInt8).view({Bt, int64_t(A)}).to(torch::kBool)};
}

namespace {
// Per block slot k = 1..B-1: the position it predicts, its target row (the target's distribution
// at a + k - 1) and whether it is scored.
struct SlotTargets {
  torch::Tensor row;     // [Bt, A, B - 1] flat index into [Bt * T] of the target row
  torch::Tensor scored;  // [Bt, A, B - 1] float
  torch::Tensor weight;  // [B - 1]: exp(-(k - 1) / gamma)
};

SlotTargets slot_targets(const TttBatch& b, const Anchors& a, int block_size, double gamma) {
  const int64_t Bt = b.ids.size(0), T = b.ids.size(1), A = a.pos.size(1);
  auto k = torch::arange(1, block_size, torch::kLong);
  auto pos = a.pos.unsqueeze(-1) + k;  // [Bt, A, B - 1]
  auto inside = pos < T;
  auto at = pos.clamp_max(T - 1).view({Bt, -1});
  auto scored = (b.loss_mask.gather(1, at) * real_tokens(b).gather(1, at)).view({Bt, A, -1}) * inside * a.real.unsqueeze(-1);
  auto base = (torch::arange(Bt, torch::kLong) * T).view({Bt, 1, 1});
  return {base + pos.clamp_max(T - 1) - 1, scored.to(torch::kFloat32), torch::exp(-(k - 1).to(torch::kFloat64) / gamma).to(torch::kFloat32)};
}
}  // namespace

double dflash_denominator(const TttBatch& b, const Anchors& a, int block_size, double gamma) {
  auto s = slot_targets(b, a, block_size, gamma);
  return (s.scored * s.weight).sum().item<double>();
}

TttResult dflash_forward(DFlashModule& m, const TttBatch& b, const Anchors& a, double gamma, const double* denominator) {
  const int S = m->opts.config.block_size;
  const int64_t V = b.target_logits.size(-1);
  const SlotTargets st = slot_targets(b, a, S, gamma);
  auto logits = m->forward(m->context(b.aux), b.ids.gather(1, a.pos), a.pos);  // [Bt, A, S - 1, V]
  auto target = b.target_logits.reshape({-1, V}).index_select(0, st.row.reshape({-1})).view(logits.sizes());
  auto p = torch::softmax(target, -1);
  auto ce = -(p * torch::log_softmax(logits.to(torch::kFloat32), -1)).sum(-1);  // [Bt, A, S - 1]
  const double denom = denominator ? *denominator : (st.scored * st.weight).sum().item<double>();
  TttResult r;
  r.loss = (ce * st.scored * st.weight).sum() / std::max(denom, 1e-9);
  torch::NoGradGuard ng;
  auto correct = (logits.argmax(-1) == target.argmax(-1)).to(torch::kFloat32) * st.scored;
  auto per_slot = [](const torch::Tensor& t) {
    auto s = t.sum(std::vector<int64_t>{0, 1}).to(torch::kFloat64).contiguous();
    return std::vector<double>(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
  };
  r.step_valid = per_slot(st.scored);
  r.step_correct = per_slot(correct);
  r.step_loss = per_slot(ce.detach() * st.scored);
  for (size_t k = 0; k < r.step_loss.size(); ++k) r.step_loss[k] = r.step_valid[k] > 0 ? r.step_loss[k] / r.step_valid[k] : 0;
  // Blocks wholly in supervised text: a greedy verifier accepts the leading matches and one more.
  auto whole = std::get<0>(st.scored.min(-1)) > 0;
  auto accepted = 1 + correct.cumprod(-1).sum(-1);
  r.drafts = whole.sum().item<double>();
  r.accepted = (accepted * whole).sum().item<double>();
  return r;
}

}  // namespace eaglet
