// EAGLE-3 chain drafting for many sequences at once, sharing one draft KV cache: one batched
// draft forward per draft step, and one batched forward to fold verified positions back in.
// Per sequence the cache holds "exact" positions (state g from the target's own taps) followed
// by the speculative positions of the current draft; extend() rolls those back and recomputes
// the accepted ones from the target's taps (keeping approximate KV costs acceptance: vLLM #14649).
#pragma once
#include <map>
#include <vector>

#include "cache/kv_cache.h"
#include "models/eagle3.h"

namespace eaglet {

class Eagle3Drafter {
 public:
  Eagle3Drafter(const Eagle3Draft& draft, int64_t num_blocks);
  const Eagle3Draft& draft() const { return draft_; }
  SeqId add();
  void remove(SeqId seq);
  int64_t free_blocks() const { return cache_.free_blocks(); }

  // Exact positions appended per sequence: position p pairs the target state `aux` row with the
  // token at p + 1 (`tokens`). Leaves each sequence's first draft token and last state ready.
  struct Extend {
    SeqId seq;
    std::vector<int> tokens;
    const float* aux;  // [tokens.size(), 3 * Ht]
  };
  void extend(const std::vector<Extend>& rows);
  // Up to ks[i] draft tokens (target ids) for each sequence, one batched forward per step.
  std::vector<std::vector<int>> draft(const std::vector<SeqId>& seqs, const std::vector<int>& ks);

 private:
  struct State {
    int64_t exact_len = 0;
    int next = -1;                // first draft token of the next draft()
    std::vector<float> last;      // draft state at the last exact position [H]
  };
  const Eagle3Draft& draft_;
  KvCache cache_;
  std::map<SeqId, State> states_;
};

}  // namespace eaglet
