// DFlash proposer: one draft forward per step proposes a whole block (models/dflash.h). Each
// sequence's draft cache holds its context as keys and values; the taps of every position the
// target verified (the prompt, then each step's root and accepted drafts) join it before the next
// block is drafted. A chain shape gets the block's greedy tokens; a tree shape the best nodes
// over each position's top-k (SGLang's DFlash trees). Nodes carry their draft path probability,
// where the auto policy's acceptance estimates start.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "models/dflash.h"
#include "speculation/proposer.h"

namespace eaglet {

class DFlashProposer final : public Proposer {
 public:
  // `kv_blocks`: draft KV blocks for all sequences together; forwards run on `pool`.
  DFlashProposer(const DFlashDraft& draft, int64_t kv_blocks, ThreadPool& pool);
  std::string name() const override { return "dflash"; }
  bool scores_drafts() const override { return true; }
  std::vector<int> tap_layers() const override { return draft_.config().taps; }

  void begin(SeqId seq, const std::vector<int>& prompt, const float* prompt_taps, int first_token) override;
  void end(SeqId seq) override;
  void propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) override;
  void accept(const std::vector<Accepted>& accepted) override;

 private:
  struct State {
    SeqId kv;
    int last;                     // the token the next block starts from (not yet in the context)
    std::vector<float> pending;   // taps of verified positions not yet in the draft cache
  };
  const DFlashDraft& draft_;
  ThreadPool& pool_;
  KvCache cache_;
  std::unordered_map<SeqId, State> seqs_;
  std::vector<float> logits_;
};

}  // namespace eaglet
