// How much to draft, per sequence and step. Fixed: the shape the user gave (`-k`, a tree spec).
// Auto: draft a tree of an adaptive depth, then keep the nodes that maximise expected accepted
// tokens per second for the whole batch:
//
//   rate(N) = (sequences + sum of kept nodes' acceptance estimates) / (draft time + c(N))
//
// where N is the step's token count (roots, kept nodes, prefill tokens) and c(N) the measured
// forward cost (cost_model.h). Nodes are taken best-first across all sequences; the step keeps
// the prefix of that order with the highest rate, down to no draft at all, so speculation is
// dropped when the forward's cost grows faster than the tokens it would gain (high concurrency).
//
// Acceptance estimates: a node is accepted with about its draft path probability (EAGLE-2's
// observation), calibrated online per (depth, probability) bin (chains without probabilities,
// n-gram: per depth) and scaled per sequence by its recent accepted / predicted ratio.
#pragma once
#include <memory>
#include <vector>

#include "speculation/cost_model.h"
#include "speculation/draft_tree.h"

namespace eaglet {

struct DraftPolicyConfig {
  bool adaptive = false;  // auto
  TreeShape shape;        // fixed shape, or the largest tree auto may draft
  // Auto for a block draft (DFlash): one forward drafts the whole chain, so every step asks for
  // the longest chain the caps allow and trim() alone decides how much of it to verify; there is
  // no per-sequence depth to adapt.
  bool whole_block = false;
};

class DraftPolicy {
 public:
  // Per-sequence state, held by the engine next to the sequence.
  struct SeqState {
    int depth = 0;                      // auto: the depth to draft next
    int topk = 1;                       // auto: children per expanded node next time
    double predicted = 0, accepted = 0;  // decayed sums behind the per-sequence scale
  };

  DraftPolicy(DraftPolicyConfig cfg, std::shared_ptr<const CostModel> cost, bool scored);
  SeqState new_sequence() const;
  // The shape to ask the proposer for; `cap` bounds the depth (tokens left, context room).
  TreeShape shape(const SeqState& s, int cap) const;
  // Auto: whether drafting for `sequences` decoding sequences can pay at all this step, given
  // the step's other tokens: even one node per sequence at the recent first-node acceptance must
  // beat plain decoding after the draft's own time. When it cannot (a compute-bound batch), the
  // engine skips the proposer for the step, draft forwards included. The estimates behind this
  // only move when drafts are verified, so after kProbeEvery skipped steps one step drafts one
  // level anyway (and trim() keeps what pays of it): a cold first draft forward, a stall, or a run of badly
  // drafted requests cannot switch speculation off for good. Each probe that does not bring
  // drafting back doubles the wait for the next, up to kMaxProbeEvery: where drafting never pays
  // (a quantised target whose verification is dear), a probe costs more than a step (it folds in
  // the skipped positions and drafts), and probing every 16 steps measured 7-12% slower than plain
  // decoding. Fixed shapes: always.
  bool worth_drafting(int sequences, int fixed_tokens);
  static constexpr int kProbeEvery = 16, kMaxProbeEvery = 256;
  // Auto: trims each tree in place (see above); `fixed_tokens` are the step's other tokens
  // (roots and prefill), `draft_seconds` what drafting them took and `draft_levels` the deepest
  // level drafted. Then sets each sequence's next depth and width: one level deeper while the
  // nodes the whole batch kept at its deepest level are expected to return more than that level's
  // draft forward costs, shallower when they do not or its own were trimmed away; wider while
  // some node kept every child drafted, narrower when none kept more than topk - 2. Fixed:
  // leaves the trees as drafted.
  void trim(std::vector<DraftTree>& trees, std::vector<SeqState*>& states, int fixed_tokens, double draft_seconds,
            int draft_levels);
  // After verification of `tree`, of which the first `accepted` path nodes were kept.
  void observe(SeqState& s, const DraftTree& tree, const std::vector<int>& path);

  const DraftPolicyConfig& config() const { return cfg_; }
  // Estimated acceptance of each node of `tree` (for tests and the bench report).
  std::vector<double> estimates(const SeqState& s, const DraftTree& tree) const;

 private:
  static constexpr int kBins = 20;
  int bin(const DraftTree& tree, int node, const std::vector<int>& depths) const;
  double prior(const DraftTree& tree, int node, const std::vector<int>& depths) const;
  // After a trim at `rate` tokens/s: each sequence's next depth and width (see trim()).
  void adapt_shapes(const std::vector<DraftTree>& trees, const std::vector<std::vector<double>>& est,
                    std::vector<SeqState*>& states, double rate) const;

  DraftPolicyConfig cfg_;
  std::shared_ptr<const CostModel> cost_;
  bool scored_;
  // The draft's cost per tree level (a batched forward): the lower median of the last samples,
  // so a VM stall does not set it; record_level_time() leaves out the calls that are not a
  // level's cost (the first, and probes slower than the estimate).
  double level_seconds() const;
  void record_level_time(double draft_seconds, int draft_levels);
  bool drafted_ = false;  // a draft call has been seen (the first is not a level's cost)
  // Whether `nodes` drafted per sequence, bringing `gain` expected tokens each, beat plain
  // decoding of the step after `draft` seconds of drafting.
  bool drafting_pays(int sequences, int fixed_tokens, double draft, int nodes, double gain) const;
  std::vector<double> level_samples_;  // ring of the last kLevelSamples
  size_t level_next_ = 0;
  int skipped_ = 0;        // consecutive steps worth_drafting said no
  int probe_every_ = kProbeEvery;  // skipped steps before the next probe
  bool probing_ = false;   // this step drafts only to refresh the estimates: one level
  double first_hit_ = 0.7;     // EMA of how often a tree's first node is accepted
  static constexpr double kStepWeight = 0.05, kProbeWeight = 0.25;  // its weights per step, per probe
  // Calibration: nodes verified and accepted per bin (probability bins, or depths when unscored).
  std::vector<double> seen_, hits_;
};

// "auto" | "auto:topk=2,depth=6" (auto within those caps; any subset) | "chain" (with k) |
// "topk=4,depth=5,budget=16" (a fixed tree; any subset; "tree:" prefix allowed).
DraftPolicyConfig parse_draft_shape(const std::string& spec, int k);

}  // namespace eaglet
