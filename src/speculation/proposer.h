// A draft proposer over many sequences at once (llama.cpp's common_speculative begin / draft /
// accept, vLLM's batched EagleProposer.propose). The engine core calls, per step:
//   begin()   for each sequence whose prefill just finished,
//   accept()  for each sequence just verified,
//   propose() once, for every sequence that drafts this step.
// Work queued by begin()/accept() runs inside propose(), batched over the sequences asked for (an
// EAGLE-3 draft folds their newly verified positions in with one forward); a sequence the engine
// does not ask to draft for a while keeps its queue until it does.
#pragma once
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "constrain/grammar.h"
#include "constrain/token_mask.h"
#include "speculation/draft_tree.h"

namespace eaglet {

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  // Target layers whose input residual stream the proposer needs, ascending (empty: none).
  virtual std::vector<int> tap_layers() const { return {}; }
  // Whether it drafts trees (topk > 1); chain-only proposers answer chains to any shape.
  virtual bool drafts_trees() const { return false; }
  // Whether its trees carry draft probabilities (DraftTree::scores).
  virtual bool scores_drafts() const { return false; }

  // After the target's prefill of `seq`: the prompt, its taps [P, taps*H] (null when no taps were
  // asked for) and the first sampled token.
  virtual void begin(SeqId seq, const std::vector<int>& prompt, const float* prompt_taps, int first_token) = 0;
  virtual void end(SeqId seq) = 0;

  struct Request {
    SeqId seq;
    TreeShape shape;
    // Structured output: the grammar's state after the sequence's text and the vocabulary its
    // masks use. A proposer that honours it drafts only tokens the grammar allows along each
    // path (others ignore it; verification refuses such tokens anyway).
    const constrain::Matcher* grammar = nullptr;
    const constrain::TokenTrie* vocabulary = nullptr;
  };
  // One draft tree per request (possibly empty, when the proposer has no guess).
  virtual void propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) = 0;

  // The target accepted `tokens` (the accepted drafts, then its own next token) for `seq`;
  // `taps` holds the verification pass's rows for the root and each accepted node, in path order.
  struct Accepted {
    SeqId seq;
    std::vector<int> tokens;
    const float* taps;
  };
  virtual void accept(const std::vector<Accepted>& accepted) = 0;
};

}  // namespace eaglet
