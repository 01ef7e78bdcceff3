// EAGLE-3 chain drafting for one sequence. The draft's KV cache holds "exact" positions, whose
// state g came from the target's own hidden states, followed by the speculative positions of the
// current draft; accept() rolls those back and recomputes the accepted ones from the target's
// taps (keeping approximate KV costs acceptance: vLLM #14649).
#pragma once
#include <memory>

#include "cache/kv_cache.h"
#include "models/eagle3.h"
#include "spec/proposer.h"

namespace eaglet {

class Eagle3Proposer : public Proposer {
 public:
  Eagle3Proposer(const Eagle3Draft& draft, int max_tokens);
  std::string name() const override { return "eagle3"; }
  std::vector<int> tap_layers() const override { return draft_.config().aux_layers; }
  void begin(const std::vector<int>& prompt, const std::vector<float>& prompt_taps, int first_token) override;
  std::vector<int> draft(int k) override;
  void accept(int accepted, int next, const float* taps) override;

 private:
  // Appends exact positions: inputs (tokens[i], fc(aux row i)); leaves the first draft token and
  // the last state ready for draft().
  void extend_exact(const std::vector<int>& tokens, const float* aux);

  const Eagle3Draft& draft_;
  KvCache cache_;
  SeqId seq_;
  int64_t exact_len_ = 0;
  int next_draft_ = -1;            // first draft token (target id) for the next draft() call
  std::vector<float> last_state_;  // draft output state at the last exact position [H]
  std::vector<int> last_draft_;
};

}  // namespace eaglet
