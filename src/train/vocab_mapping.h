// Draft-vocabulary pruning: the Vd most frequent target tokens under the loss mask, ascending;
// d2t[i] = used[i] - i (target id = draft id + d2t[draft id]), t2d[v] = v is in the draft vocab.
#pragma once
#include <cstdint>
#include <vector>

#include "train/dataset.h"

namespace eaglet {

struct VocabMapping {
  std::vector<int64_t> d2t;  // [Vd]
  std::vector<uint8_t> t2d;  // [V]
  std::vector<int> draft_to_target() const;
};

VocabMapping build_vocab_mapping(const std::vector<TrainSample>& samples, int vocab, int draft_vocab);

}  // namespace eaglet
