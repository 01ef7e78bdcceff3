// A draft-token proposer for one sequence (llama.cpp-style begin / draft / accept). The
// speculative loop asks it for up to k tokens, has the target verify them in one pass, and then
// tells it what was accepted, with the target's hidden-state taps for the verified positions.
#pragma once
#include <string>
#include <vector>

namespace eaglet {

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  // Target layers whose input residual stream the proposer needs, ascending (empty: none).
  virtual std::vector<int> tap_layers() const { return {}; }
  // After the target's prefill: the prompt, its taps [P, taps*H] and the first sampled token.
  virtual void begin(const std::vector<int>& prompt, const std::vector<float>& prompt_taps, int first_token) = 0;
  // Up to k draft tokens continuing the sequence (fewer, even none, when it has no guess).
  virtual std::vector<int> draft(int k) = 0;
  // The target kept the first `accepted` drafts and then produced `next`; `taps` holds the
  // verification pass's rows 0..accepted (the positions whose tokens are now final).
  virtual void accept(int accepted, int next, const float* taps) = 0;
};

}  // namespace eaglet
