#include "spec/eagle3_proposer.h"

namespace eaglet {

Eagle3Proposer::Eagle3Proposer(const Eagle3Draft& draft, int max_tokens)
    : drafter_(draft, (max_tokens + 15) / 16 + 2), seq_(drafter_.add()) {}

void Eagle3Proposer::begin(const std::vector<int>& prompt, const std::vector<float>& prompt_taps, int first_token) {
  std::vector<int> inputs(prompt.begin() + 1, prompt.end());
  inputs.push_back(first_token);
  drafter_.extend({{seq_, inputs, prompt_taps.data()}});
}

std::vector<int> Eagle3Proposer::draft(int k) {
  last_draft_ = drafter_.draft({seq_}, {k})[0];
  return last_draft_;
}

void Eagle3Proposer::accept(int accepted, int next, const float* taps) {
  std::vector<int> inputs(last_draft_.begin(), last_draft_.begin() + accepted);
  inputs.push_back(next);
  drafter_.extend({{seq_, inputs, taps}});
}

}  // namespace eaglet
