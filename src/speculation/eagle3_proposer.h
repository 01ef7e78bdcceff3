// EAGLE-3 drafting for many sequences sharing one draft KV cache.
//
// Per sequence the cache holds "exact" positions (state g from the target's own taps) followed by
// the speculative positions of the current draft. Verified positions are folded back in with one
// batched forward over every sequence, after rolling the speculative ones back (keeping their
// approximate KV costs acceptance: vLLM #14649).
//
// Drafting builds a tree as EAGLE-2 / SGLang do: the root's children are the top-k of the draft's
// distribution at the last exact position; at each further depth the `topk` best frontier nodes
// (by path probability) are expanded with one batched draft forward over every sequence, each node
// seeing the exact prefix and its own ancestors; finally the `budget` nodes of highest path
// probability are kept. With topk = 1 this is chain drafting. Under a grammar (structured output)
// each node's candidates are the best tokens the grammar allows after the node's path, so the
// draft spends its budget on tokens verification can accept.
#pragma once
#include <map>

#include "models/eagle3.h"
#include "speculation/proposer.h"

namespace eaglet {

class Eagle3Proposer : public Proposer {
 public:
  static constexpr int kMaxTopk = 8;

  Eagle3Proposer(const Eagle3Draft& draft, int64_t num_blocks, ThreadPool& pool);
  std::string name() const override { return "eagle3"; }
  std::vector<int> tap_layers() const override { return draft_.config().aux_layers; }
  bool drafts_trees() const override { return true; }
  bool scores_drafts() const override { return true; }
  void begin(SeqId seq, const std::vector<int>& prompt, const float* prompt_taps, int first_token) override;
  void end(SeqId seq) override;
  void propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) override;
  void accept(const std::vector<Accepted>& accepted) override;
  const Eagle3Draft& draft() const { return draft_; }

 private:
  struct Candidate {
    int token;
    float prob;
  };
  struct State {
    SeqId kv = 0;
    int64_t exact_len = 0;
    std::vector<Candidate> root;  // top kMaxTopk of the draft distribution after the last exact position
    std::vector<float> root_logits;  // that distribution's logits [Vd] (a grammar masks them)
    std::vector<float> last;      // draft state at the last exact position [H]
    // Positions waiting to be folded in: position p pairs the target state row p with token p + 1.
    std::vector<int> pending_tokens;
    std::vector<float> pending_aux;
  };
  // Folds the pending positions of the requested sequences in with one forward. Sequences the
  // engine does not ask to draft keep theirs (target taps included) until it does.
  void flush(const std::vector<Request>& requests);
  // propose(): plant each tree's first level, then grow all of them a level per draft forward.
  struct Work;
  std::vector<Work> plant(const std::vector<Request>& requests, int* max_depth);
  bool grow(std::vector<Work>& work, int depth);
  // The `k` most likely draft tokens (as target ids) of a draft-vocabulary logit row; with a
  // grammar state `at`, of those it allows (fewer when fewer are allowed).
  std::vector<Candidate> top_candidates(const float* logits, int k) const;
  std::vector<Candidate> top_allowed(const float* logits, int k, const constrain::Matcher& at,
                                     const constrain::TokenTrie& vocabulary) const;

  const Eagle3Draft& draft_;
  ThreadPool& pool_;
  KvCache cache_;
  std::map<SeqId, State> states_;
};

}  // namespace eaglet
