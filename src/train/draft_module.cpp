#include "train/draft_module.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace eaglet {

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

DraftModuleImpl::DraftModuleImpl(const DraftModuleOptions& options) : opts(options) {
  using torch::nn::LinearOptions;
  const Eagle3Config& o = opts.config;
  const int64_t H = o.hidden, qd = int64_t(o.num_heads) * o.head_dim, kvd = int64_t(o.num_kv_heads) * o.head_dim;
  fc = register_module("fc", torch::nn::Linear(LinearOptions(3 * o.target_hidden, H).bias(false)));
  q_proj = register_module("q_proj", torch::nn::Linear(LinearOptions(2 * H, qd).bias(false)));
  k_proj = register_module("k_proj", torch::nn::Linear(LinearOptions(2 * H, kvd).bias(false)));
  v_proj = register_module("v_proj", torch::nn::Linear(LinearOptions(2 * H, kvd).bias(false)));
  o_proj = register_module("o_proj", torch::nn::Linear(LinearOptions(qd, H).bias(false)));
  gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(H, o.intermediate).bias(false)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(H, o.intermediate).bias(false)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(o.intermediate, H).bias(false)));
  lm_head = register_module("lm_head", torch::nn::Linear(LinearOptions(H, o.draft_vocab).bias(false)));
  input_layernorm = register_parameter("input_layernorm", torch::ones({H}));
  hidden_norm = register_parameter("hidden_norm", torch::ones({H}));
  post_attention_layernorm = register_parameter("post_attention_layernorm", torch::ones({H}));
  norm = register_parameter("norm", torch::ones({H}));
  if (o.fc_norm)
    for (int i = 0; i < 3; ++i) fc_norms.push_back(register_parameter(fmt::format("fc_norm_{}", i), torch::ones({o.target_hidden})));
  embed = register_buffer("embed", torch::zeros({o.vocab, H}));
  // The frequencies inference uses (models/rope), so training and serving rotate alike.
  EAGLET_CHECK(int64_t(opts.rope.inv_freq.size()) * 2 == o.head_dim, "draft RoPE: {} frequencies for head_dim {}",
               opts.rope.inv_freq.size(), o.head_dim);
  inv_freq = register_buffer("inv_freq", torch::tensor(opts.rope.inv_freq, torch::kFloat32));
}

torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

std::pair<torch::Tensor, torch::Tensor> rope_angles(const Rope& rope, const torch::Tensor& inv_freq,
                                                    const torch::Tensor& positions) {
  auto ang = (positions.to(torch::kFloat32) * rope.position_scale).unsqueeze(-1) * inv_freq;
  return {ang.cos(), ang.sin()};
}

torch::Tensor ttt_attention(const torch::Tensor& q, const std::vector<torch::Tensor>& keys,
                            const std::vector<torch::Tensor>& values) {
  const int64_t T = q.size(2), hd = q.size(3), group = q.size(1) / keys[0].size(1);
  const double scale = 1.0 / std::sqrt(double(hd));
  auto expand = [&](const torch::Tensor& t) { return group == 1 ? t : t.repeat_interleave(group, 1); };
  auto causal = torch::ones({T, T}, q.options().dtype(torch::kBool)).triu(1);
  std::vector<torch::Tensor> scores = {
      torch::matmul(q, expand(keys[0]).transpose(-1, -2)).mul(scale).masked_fill(causal, -INFINITY)};
  for (size_t j = 1; j < keys.size(); ++j) scores.push_back((q * expand(keys[j])).sum(-1, true).mul(scale));
  auto p = torch::softmax(torch::cat(scores, -1).to(torch::kFloat32), -1).to(q.scalar_type());
  auto out = torch::matmul(p.narrow(-1, 0, T), expand(values[0]));
  for (size_t j = 1; j < keys.size(); ++j) out = out + p.narrow(-1, T + int64_t(j) - 1, 1) * expand(values[j]);
  return out;
}

std::pair<torch::Tensor, torch::Tensor> DraftModuleImpl::step(const torch::Tensor& tokens, const torch::Tensor& g,
                                                              int64_t pos0, std::vector<torch::Tensor>& keys,
                                                              std::vector<torch::Tensor>& values) {
  const int64_t B = tokens.size(0), T = tokens.size(1), nh = opts.config.num_heads, nkv = opts.config.num_kv_heads, hd = opts.config.head_dim;
  auto e = rms_norm(embed.index_select(0, tokens.reshape({-1})).reshape({B, T, -1}), input_layernorm, opts.config.rms_eps);
  auto h = rms_norm(g, hidden_norm, opts.config.rms_eps);
  auto x = torch::cat({e, h}, -1);
  auto q = q_proj(x).view({B, T, nh, hd}).transpose(1, 2);
  auto k = k_proj(x).view({B, T, nkv, hd}).transpose(1, 2);
  auto v = v_proj(x).view({B, T, nkv, hd}).transpose(1, 2);
  auto [cos, sin] = rope_angles(opts.rope, inv_freq, torch::arange(pos0, pos0 + T, inv_freq.options()));
  q = rotate(q, cos, sin);
  k = rotate(k, cos, sin);
  keys.push_back(k);
  values.push_back(v);
  auto attn = ttt_attention(q, keys, values).transpose(1, 2).reshape({B, T, nh * hd});
  auto h1 = g + o_proj(attn);
  auto hn = rms_norm(h1, post_attention_layernorm, opts.config.rms_eps);
  auto out = h1 + down_proj(torch::silu(gate_proj(hn)) * up_proj(hn));
  auto normed = rms_norm(out, norm, opts.config.rms_eps);
  return {lm_head(normed), opts.config.norm_output ? normed : out};
}

torch::Tensor DraftModuleImpl::fuse(const torch::Tensor& aux) {
  if (fc_norms.empty()) return fc(aux);
  auto taps = aux.chunk(3, -1);
  for (size_t i = 0; i < 3; ++i) taps[i] = rms_norm(taps[i], fc_norms[i], opts.config.rms_eps);
  return fc(torch::cat(taps, -1));
}

namespace {
// Shifts [B, T, ...] left by n along dim 1, filling with zeros.
torch::Tensor shift_left(const torch::Tensor& x, int64_t n) {
  if (n == 0) return x;
  const int64_t T = x.size(1);
  if (n >= T) return torch::zeros_like(x);
  return torch::cat({x.narrow(1, n, T - n), torch::zeros_like(x.narrow(1, 0, n))}, 1);
}
}  // namespace

namespace {
// Positions scored at TTT step i: in the loss mask and with the target's argmax in the draft
// vocabulary (the distribution is restricted to it), one further along per step.
torch::Tensor valid_positions(const torch::Tensor& mask, const torch::Tensor& target, const torch::Tensor& in_draft) {
  return mask * in_draft.index_select(0, target.argmax(-1).reshape({-1})).reshape(mask.sizes()).to(mask.dtype());
}
}  // namespace

torch::Tensor real_tokens(const TttBatch& b) { return b.valid.defined() ? b.valid : torch::ones_like(b.loss_mask); }

torch::Tensor ttt_step_mask(const TttBatch& b, int step) {
  auto mask = b.alignment == LossMaskAlignment::TorchSpec ? b.loss_mask : shift_left(b.loss_mask, 1);
  // Index t needs the target's distribution at t + 1 + step.
  return shift_left(mask, step) * shift_left(real_tokens(b), step + 1);
}

std::vector<double> ttt_valid_counts(const TttBatch& b, int steps, const torch::Tensor& in_draft) {
  torch::NoGradGuard ng;
  auto target = shift_left(b.target_logits, 1);
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) {
    out.push_back(valid_positions(ttt_step_mask(b, i), target, in_draft).sum().item<double>());
    target = shift_left(target, 1);
  }
  return out;
}

TttResult ttt_forward(DraftModule& m, const TttBatch& b, int steps, double step_weight,
                      const torch::Tensor& draft_to_target, const torch::Tensor& in_draft,
                      const std::vector<double>* denominators) {
  // Index t pairs f_t with x_{t+1} and is scored against the target's distribution at t + 1.
  auto ids = shift_left(b.ids, 1);
  auto target = shift_left(b.target_logits, 1);
  TttResult r;
  std::vector<torch::Tensor> keys, values;
  auto g = m->fuse(b.aux);
  torch::Tensor total;
  for (int i = 0; i < steps; ++i) {
    auto [logits, out] = m->step(ids, g, i, keys, values);
    auto target_draft = target.index_select(-1, draft_to_target);  // [B, T, Vd]
    auto p = torch::softmax(target_draft.to(torch::kFloat32), -1);
    auto logq = torch::log_softmax(logits.to(torch::kFloat32), -1);
    auto valid = valid_positions(ttt_step_mask(b, i), target, in_draft);
    auto loss = (-(p * logq).sum(-1) * valid).sum();
    loss = denominators ? loss / std::max(1.0, (*denominators)[size_t(i)]) : loss / valid.sum().clamp_min(1.0);
    total = i == 0 ? loss : total + std::pow(step_weight, i) * loss;
    torch::NoGradGuard ng;
    r.step_loss.push_back(loss.item<double>());
    r.step_correct.push_back(((logits.argmax(-1) == target_draft.argmax(-1)).to(valid.dtype()) * valid).sum().item<double>());
    r.step_valid.push_back(valid.sum().item<double>());
    // Next step: the draft's own state, tokens and targets one further along (teacher-forced).
    g = out;
    ids = shift_left(ids, 1);
    target = shift_left(target, 1);
  }
  r.loss = total;
  return r;
}

}  // namespace eaglet
