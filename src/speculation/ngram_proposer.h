// Prompt-lookup decoding: find the most recent earlier occurrence of the sequence's last n tokens
// (longest n first) and propose the tokens that followed it, as a chain. The baseline every
// EAGLE-3 result is compared with.
#pragma once
#include <map>

#include "speculation/proposer.h"

namespace eaglet {

class NgramProposer : public Proposer {
 public:
  explicit NgramProposer(int max_ngram = 3, int min_ngram = 1);
  std::string name() const override { return "ngram"; }
  void begin(SeqId seq, const std::vector<int>& prompt, const float*, int first_token) override;
  void end(SeqId seq) override { history_.erase(seq); }
  void propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) override;
  void accept(const std::vector<Accepted>& accepted) override;

  // The lookup itself, for one token history.
  std::vector<int> lookup(const std::vector<int>& history, int k) const;

 private:
  int max_n_, min_n_;
  std::map<SeqId, std::vector<int>> history_;
};

}  // namespace eaglet
