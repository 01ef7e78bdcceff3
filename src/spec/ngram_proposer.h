// Prompt-lookup decoding: find the most recent earlier occurrence of the sequence's last n tokens
// (longest n first) and propose the tokens that followed it. The baseline every EAGLE-3 result
// is compared with.
#pragma once
#include "spec/proposer.h"

namespace eaglet {

class NgramProposer : public Proposer {
 public:
  explicit NgramProposer(int max_ngram = 3, int min_ngram = 1) : max_n_(max_ngram), min_n_(min_ngram) {}
  std::string name() const override { return "ngram"; }
  void begin(const std::vector<int>& prompt, const std::vector<float>&, int first_token) override;
  std::vector<int> draft(int k) override;
  void accept(int accepted, int next, const float*) override;

 private:
  int max_n_, min_n_;
  std::vector<int> history_;
  std::vector<int> last_draft_;
};

}  // namespace eaglet
