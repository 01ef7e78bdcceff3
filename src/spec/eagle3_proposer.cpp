#include "spec/eagle3_proposer.h"

#include "engine/sampler.h"

namespace eaglet {

Eagle3Proposer::Eagle3Proposer(const Eagle3Draft& draft, int max_tokens)
    : draft_(draft), cache_(draft.kv_shape((max_tokens + 15) / 16 + 2)), seq_(cache_.create()) {}

void Eagle3Proposer::extend_exact(const std::vector<int>& tokens, const float* aux) {
  const int64_t n = int64_t(tokens.size()), H = draft_.config().hidden;
  std::vector<float> g(size_t(n * H)), out(size_t(n * H)), logits;
  draft_.fuse_aux(aux, n, g.data());
  draft_.forward(cache_, {Eagle3Rows{seq_, tokens}}, g.data(), out.data(), &logits);
  exact_len_ += n;
  last_state_.assign(out.end() - H, out.end());
  next_draft_ = draft_.to_target_id(argmax(logits.data(), int(logits.size())));
}

void Eagle3Proposer::begin(const std::vector<int>& prompt, const std::vector<float>& prompt_taps, int first_token) {
  cache_.truncate(seq_, 0);
  exact_len_ = 0;
  // Position p pairs the target's state at p with the token at p + 1.
  std::vector<int> inputs(prompt.begin() + 1, prompt.end());
  inputs.push_back(first_token);
  extend_exact(inputs, prompt_taps.data());
}

std::vector<int> Eagle3Proposer::draft(int k) {
  last_draft_.clear();
  if (k <= 0) return last_draft_;
  last_draft_.push_back(next_draft_);
  const int64_t H = draft_.config().hidden;
  std::vector<float> g = last_state_, out(static_cast<size_t>(H)), logits;
  for (int i = 1; i < k; ++i) {
    draft_.forward(cache_, {Eagle3Rows{seq_, {last_draft_.back()}}}, g.data(), out.data(), &logits);
    last_draft_.push_back(draft_.to_target_id(argmax(logits.data(), int(logits.size()))));
    g.swap(out);
  }
  return last_draft_;
}

void Eagle3Proposer::accept(int accepted, int next, const float* taps) {
  cache_.truncate(seq_, exact_len_);
  std::vector<int> inputs(last_draft_.begin(), last_draft_.begin() + accepted);
  inputs.push_back(next);
  extend_exact(inputs, taps);
}

}  // namespace eaglet
