#include "spec/ngram_proposer.h"

#include <algorithm>

namespace eaglet {

void NgramProposer::begin(const std::vector<int>& prompt, const std::vector<float>&, int first_token) {
  history_ = prompt;
  history_.push_back(first_token);
}

std::vector<int> NgramProposer::draft(int k) {
  last_draft_.clear();
  const int len = int(history_.size());
  for (int n = std::min(max_n_, len - 1); n >= min_n_; --n) {
    const int* suffix = history_.data() + len - n;
    // Most recent match first: recent context predicts best.
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, history_.data() + start)) continue;
      for (int i = start + n; i < len && int(last_draft_.size()) < k; ++i) last_draft_.push_back(history_[size_t(i)]);
      return last_draft_;
    }
  }
  return last_draft_;
}

void NgramProposer::accept(int accepted, int next, const float*) {
  history_.insert(history_.end(), last_draft_.begin(), last_draft_.begin() + accepted);
  history_.push_back(next);
}

}  // namespace eaglet
