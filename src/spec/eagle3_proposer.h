// EAGLE-3 drafting for one sequence: an Eagle3Drafter holding just that sequence.
#pragma once
#include "spec/eagle3_drafter.h"
#include "spec/proposer.h"

namespace eaglet {

class Eagle3Proposer : public Proposer {
 public:
  Eagle3Proposer(const Eagle3Draft& draft, int max_tokens);
  std::string name() const override { return "eagle3"; }
  std::vector<int> tap_layers() const override { return drafter_.draft().config().aux_layers; }
  void begin(const std::vector<int>& prompt, const std::vector<float>& prompt_taps, int first_token) override;
  std::vector<int> draft(int k) override;
  void accept(int accepted, int next, const float* taps) override;

 private:
  Eagle3Drafter drafter_;
  SeqId seq_;
  std::vector<int> last_draft_;
};

}  // namespace eaglet
