// The BPE merge loop shared by every tokenizer flavour: symbols in a linked list, candidate pairs
// in a heap, lowest priority merged first (leftmost on ties). O(n log n), so a SentencePiece-style
// input that is one long "word" stays fast. Where the priority comes from is the caller's:
// HF merge ranks, tiktoken ranks of the merged bytes, or SentencePiece scores.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace eaglet {

struct MergeResult {
  bool ok = false;
  double priority = 0;  // lower merges first
  int merged_id = -1;
};
using MergeFn = std::function<MergeResult(int left, int right)>;

// `symbols` are initial token ids; returns the ids after all merges.
std::vector<int> bpe_merge(const std::vector<int>& symbols, const MergeFn& merge);

}  // namespace eaglet
