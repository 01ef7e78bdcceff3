#include "speculation/ngram_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace eaglet {

NgramProposer::NgramProposer(int max_ngram, int min_ngram) : max_n_(max_ngram), min_n_(min_ngram) {
  EAGLET_CHECK(min_ngram >= 1 && max_ngram >= min_ngram, "n-gram sizes need 1 <= min ({}) <= max ({})", min_ngram,
               max_ngram);
}

void NgramProposer::begin(SeqId seq, const std::vector<int>& prompt, const float*, int first_token) {
  auto& h = history_[seq];
  h = prompt;
  h.push_back(first_token);
}

std::vector<int> NgramProposer::lookup(const std::vector<int>& history, int k) const {
  std::vector<int> out;
  const int len = int(history.size());
  for (int n = std::min(max_n_, len - 1); n >= min_n_; --n) {
    const int* suffix = history.data() + len - n;
    // Most recent match first: recent context predicts best.
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, history.data() + start)) continue;
      for (int i = start + n; i < len && int(out.size()) < k; ++i) out.push_back(history[size_t(i)]);
      return out;
    }
  }
  return out;
}

void NgramProposer::propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) {
  trees->assign(requests.size(), DraftTree{});
  for (size_t i = 0; i < requests.size(); ++i)
    if (!requests[i].shape.empty())
      (*trees)[i] = DraftTree::chain(lookup(history_.at(requests[i].seq), std::min(requests[i].shape.depth, requests[i].shape.budget)));
}

void NgramProposer::accept(const std::vector<Accepted>& accepted) {
  for (auto& a : accepted) {
    auto& h = history_.at(a.seq);
    h.insert(h.end(), a.tokens.begin(), a.tokens.end());
  }
}

}  // namespace eaglet
