#include "train/vocab_mapping.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace eaglet {

std::vector<int> VocabMapping::draft_to_target() const {
  std::vector<int> out(d2t.size());
  for (size_t i = 0; i < d2t.size(); ++i) out[i] = int(int64_t(i) + d2t[i]);
  return out;
}

VocabMapping build_vocab_mapping(const std::vector<TrainSample>& samples, int vocab, int draft_vocab) {
  EAGLET_CHECK(draft_vocab >= 1 && draft_vocab <= vocab, "draft_vocab_size {} must be in [1, {}]", draft_vocab, vocab);
  std::vector<int64_t> counts(size_t(vocab), 0);
  for (auto& s : samples)
    for (size_t i = 0; i < s.ids.size(); ++i)
      if (s.loss_mask[i] && s.ids[i] >= 0 && s.ids[i] < vocab) ++counts[size_t(s.ids[i])];
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Most frequent first; ties (and unused tokens padding a small corpus) by id.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[size_t(a)] > counts[size_t(b)]; });
  std::vector<int> used(order.begin(), order.begin() + draft_vocab);
  std::sort(used.begin(), used.end());
  VocabMapping m;
  m.t2d.assign(size_t(vocab), 0);
  for (size_t i = 0; i < used.size(); ++i) {
    m.d2t.push_back(int64_t(used[i]) - int64_t(i));
    m.t2d[size_t(used[i])] = 1;
  }
  return m;
}

}  // namespace eaglet
