#include "sampling/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace eaglet {

void validate(const SamplingParams& p) {
  EAGLET_CHECK(std::isfinite(p.temperature) && p.temperature >= 0, "temperature must be >= 0 (got {})", p.temperature);
  EAGLET_CHECK(p.top_k >= 0, "top_k must be >= 0 (got {})", p.top_k);
  EAGLET_CHECK(p.top_p > 0 && p.top_p <= 1, "top_p must be in (0, 1] (got {})", p.top_p);
  EAGLET_CHECK(p.min_p >= 0 && p.min_p <= 1, "min_p must be in [0, 1] (got {})", p.min_p);
  EAGLET_CHECK(p.presence_penalty >= -2 && p.presence_penalty <= 2, "presence_penalty must be in [-2, 2] (got {})", p.presence_penalty);
  EAGLET_CHECK(p.frequency_penalty >= -2 && p.frequency_penalty <= 2, "frequency_penalty must be in [-2, 2] (got {})", p.frequency_penalty);
  EAGLET_CHECK(p.repetition_penalty > 0 && p.repetition_penalty <= 2, "repetition_penalty must be in (0, 2] (got {})", p.repetition_penalty);
}

int argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

double log_partition(const float* logits, int n) {
  const double mx = *std::max_element(logits, logits + n);
  double z = 0;
  for (int i = 0; i < n; ++i) z += std::exp(double(logits[i]) - mx);
  return std::log(z) + mx;
}

void target_probs(const float* logits, int n, const SamplingParams& p, std::vector<float>* probs) {
  probs->assign(size_t(n), 0.0f);
  if (p.greedy()) {
    (*probs)[size_t(argmax(logits, n))] = 1.0f;
    return;
  }
  float mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const float e = std::exp((logits[i] - mx) / p.temperature);
    (*probs)[size_t(i)] = e;
    sum += e;
  }
  for (auto& v : *probs) v = float(v / sum);
  const bool need_sort = (p.top_k > 0 && p.top_k < n) || p.top_p < 1.0f;
  if (need_sort) {
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    // Stable order (probability, then id) so masks are deterministic under ties.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return (*probs)[size_t(a)] > (*probs)[size_t(b)]; });
    int keep = n;
    if (p.top_k > 0) keep = std::min(keep, p.top_k);
    if (p.top_p < 1.0f) {
      double cum = 0;
      int k = 0;
      while (k < keep) {
        cum += (*probs)[size_t(order[size_t(k)])];
        ++k;
        if (cum >= p.top_p) break;
      }
      keep = k;
    }
    for (int i = keep; i < n; ++i) (*probs)[size_t(order[size_t(i)])] = 0.0f;
  }
  if (p.min_p > 0) {
    const float top = *std::max_element(probs->begin(), probs->end());
    for (auto& v : *probs)
      if (v < p.min_p * top) v = 0.0f;
  }
  double total = 0;
  for (float v : *probs) total += v;
  for (auto& v : *probs) v = float(v / total);
}

int Sampler::draw(const std::vector<float>& probs) {
  double total = 0;
  for (float v : probs) total += v;
  double u = uniform() * total, cum = 0;
  int last_nonzero = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    last_nonzero = int(i);
    cum += probs[i];
    if (u < cum) return int(i);
  }
  return last_nonzero;
}

Sampler::Sampler(const SamplingParams& p) : params_(p), rng_(p.seed) {
  if (p.grammar) {
    EAGLET_CHECK(p.vocabulary, "a grammar-constrained request needs the tokenizer's vocabulary");
    matcher_.emplace(p.grammar);
  }
}

void Sampler::set_prompt(const std::vector<int>& prompt) {
  if (params_.repetition_penalty != 1) prompt_tokens_.insert(prompt.begin(), prompt.end());
}

void Sampler::accept(int token) {
  if (params_.has_logits_processors()) ++output_counts_[token];
  // End of sequence ends the text; any other token the mask let through moves the grammar on.
  if (matcher_ && token >= 0 && token < params_.vocabulary->vocab() && !params_.vocabulary->is_eos(token))
    matcher_->accept(params_.vocabulary->bytes(token));
}

const float* Sampler::masked(const float* logits, int n, const constrain::Matcher& at) {
  const auto t0 = std::chrono::steady_clock::now();
  masked_.assign(logits, logits + n);
  params_.vocabulary->mask(at, masked_.data(), n);
  ++masks_;
  mask_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return masked_.data();
}

const float* Sampler::processed(const float* logits, int n) {
  processed_.assign(logits, logits + n);
  for (auto [id, bias] : params_.logit_bias)
    if (id >= 0 && id < n) processed_[size_t(id)] += bias;
  const float rp = params_.repetition_penalty;
  auto repeat = [&](int t) {  // vLLM's rule: shrink a positive logit, grow a negative one's magnitude
    float& l = processed_[size_t(t)];
    l = l > 0 ? l / rp : l * rp;
  };
  if (rp != 1) {
    for (int t : prompt_tokens_)
      if (t >= 0 && t < n) repeat(t);
    for (auto [t, c] : output_counts_)
      if (t >= 0 && t < n && !prompt_tokens_.count(t)) repeat(t);
  }
  for (auto [t, c] : output_counts_)
    if (t >= 0 && t < n) processed_[size_t(t)] -= params_.frequency_penalty * float(c) + params_.presence_penalty;
  return processed_.data();
}

int Sampler::sample(const float* logits, int n, const constrain::Matcher* at) {
  if (params_.has_logits_processors()) logits = processed(logits, n);
  if (matcher_) logits = masked(logits, n, at ? *at : *matcher_);
  if (params_.greedy()) return argmax(logits, n);
  target_probs(logits, n, params_, &probs_);
  return draw(probs_);
}

}  // namespace eaglet
