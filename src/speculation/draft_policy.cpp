#include "speculation/draft_policy.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "models/attention.h"

namespace eaglet {

namespace {
constexpr double kPriorWeight = 4;    // pseudo-observations behind each bin's prior
constexpr int kDepthBins = 16;        // scored trees: calibration per (depth, probability) bin
constexpr size_t kLevelSamples = 9;   // draft-cost samples the median is taken over
constexpr double kSeqDecay = 0.9;     // per-step decay of a sequence's accepted / predicted sums
constexpr int kDraftLevelRows = 16;   // rows of one draft level of the batch that width keeps within
constexpr int kMaxAutoDepth = 8;
}  // namespace

DraftPolicyConfig parse_draft_shape(const std::string& spec, int k) {
  DraftPolicyConfig c;
  if (spec == "chain") {
    c.shape = TreeShape::chain(k);
    return c;
  }
  // "auto", "auto:<caps>": adaptive, within the caps; "[tree:]<shape>": fixed.
  std::string s = spec;
  if (spec == "auto" || spec.rfind("auto:", 0) == 0) {
    c.adaptive = true;
    // 31 nodes and the root fill exactly the 32 rows of one AMX tile pass; a 33rd token costs a
    // second pass (cost_model.cpp). Batches of several sequences still reach the larger sizes,
    // where the measured curve shows the step.
    c.shape = {4, kMaxAutoDepth, 31};
    s = spec.size() > 5 ? spec.substr(5) : "";
  } else {
    if (s.rfind("tree:", 0) == 0) s = s.substr(5);
    c.shape = {4, 5, 16};
  }
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    const size_t eq = item.find('=');
    int v = -1;
    try {
      if (eq != std::string::npos) v = std::stoi(item.substr(eq + 1));
    } catch (const std::exception&) {
    }
    const std::string name = eq == std::string::npos ? item : item.substr(0, eq);
    if (v < 0 || (name != "topk" && name != "depth" && name != "budget"))
      fail("--draft-shape '{}': '{}' is not one of topk=N, depth=N, budget=N (or auto, chain)", spec, item);
    (name == "topk" ? c.shape.topk : name == "depth" ? c.shape.depth : c.shape.budget) = v;
    at = comma + 1;
  }
  EAGLET_CHECK(c.shape.topk >= 1 && c.shape.topk <= 8, "--draft-shape: topk must be in [1, 8] (got {})", c.shape.topk);
  EAGLET_CHECK(c.shape.depth >= 1 && c.shape.depth <= 16, "--draft-shape: depth must be in [1, 16] (got {})",
               c.shape.depth);
  EAGLET_CHECK(c.shape.budget >= 1 && c.shape.budget < kMaxTreeTokens, "--draft-shape: budget must be in [1, {}] (got {})",
               kMaxTreeTokens - 1, c.shape.budget);
  return c;
}

DraftPolicy::DraftPolicy(DraftPolicyConfig cfg, std::shared_ptr<const CostModel> cost, bool scored)
    : cfg_(cfg), cost_(std::move(cost)), scored_(scored),
      seen_(size_t(scored ? kDepthBins * kBins : kMaxTreeTokens + 1), 0.0),
      hits_(seen_.size(), 0.0) {
  EAGLET_CHECK(!cfg_.adaptive || cost_, "adaptive drafting needs a cost model");
}

DraftPolicy::SeqState DraftPolicy::new_sequence() const {
  SeqState s;
  s.depth = cfg_.adaptive ? std::min(3, cfg_.shape.depth) : cfg_.shape.depth;
  s.topk = cfg_.adaptive ? std::min(2, cfg_.shape.topk) : cfg_.shape.topk;
  return s;
}

TreeShape DraftPolicy::shape(const SeqState& s, int cap) const {
  TreeShape t = cfg_.shape;
  t.depth = std::min(cfg_.whole_block ? cfg_.shape.depth : s.depth, cap);
  // A probe only refreshes the estimates; a block draft costs the same forward at any size.
  if (probing_ && !cfg_.whole_block) t.depth = std::min(t.depth, 1);
  t.topk = cfg_.whole_block ? cfg_.shape.topk : std::min(s.topk, cfg_.shape.topk);
  if (t.depth <= 0) return {};
  if (t.topk <= 1) t.budget = std::min(t.budget, t.depth);
  return t;
}

int DraftPolicy::bin(const DraftTree& tree, int node, const std::vector<int>& depths) const {
  if (!scored_) return std::min(depths[size_t(node)], kMaxTreeTokens);
  // By depth too: a draft's probabilities are calibrated differently at different depths (often
  // over-confident at the first, under-confident deeper, where the target's own state is older).
  const int d = std::min(depths[size_t(node)], kDepthBins) - 1;
  return d * kBins + std::clamp(int(tree.scores[size_t(node)] * kBins), 0, kBins - 1);
}

double DraftPolicy::prior(const DraftTree& tree, int node, const std::vector<int>& depths) const {
  if (scored_) return tree.scores[size_t(node)];
  return std::pow(0.6, depths[size_t(node)]);  // n-gram chains: acceptance falls with depth
}

std::vector<double> DraftPolicy::estimates(const SeqState& s, const DraftTree& tree) const {
  const auto depths = tree.depths();
  const double scale = (s.accepted + 2.0) / (s.predicted + 2.0);
  std::vector<double> e(size_t(tree.size()));
  for (int i = 0; i < tree.size(); ++i) {
    const int b = bin(tree, i, depths);
    const double calibrated = (hits_[size_t(b)] + kPriorWeight * prior(tree, i, depths)) / (seen_[size_t(b)] + kPriorWeight);
    e[size_t(i)] = std::min(1.0, calibrated * scale);
    // A node is accepted only with its parent: its estimate cannot exceed the parent's.
    if (tree.parents[size_t(i)] >= 0) e[size_t(i)] = std::min(e[size_t(i)], e[size_t(tree.parents[size_t(i)])]);
  }
  return e;
}

// Two kinds of draft call take longer than a level and are not recorded as one: the very first
// (the draft's weights fault in and whole prompts are folded in: 87 ms a level against 7 in a
// batch of 16 on the Xeon of docs/performance.md, which kept drafting off from the start) and a
// probe that takes longer than the estimate (it folds in every position of the steps skipped
// since drafting stopped, 16 to 256 of them per sequence: recorded, it kept the estimate up and
// drafting off for good). A probe faster than the estimate is news that the draft got cheaper.
void DraftPolicy::record_level_time(double draft_seconds, int draft_levels) {
  if (draft_levels <= 0) return;
  const double per_level = draft_seconds / draft_levels;
  const bool first = !drafted_;
  drafted_ = true;
  if (first || (probing_ && !level_samples_.empty() && per_level >= level_seconds())) return;
  if (level_samples_.size() < kLevelSamples) level_samples_.push_back(per_level);
  else level_samples_[level_next_] = per_level;
  level_next_ = (level_next_ + 1) % kLevelSamples;
}

double DraftPolicy::level_seconds() const {
  if (level_samples_.empty()) return 0;
  std::vector<double> s = level_samples_;
  std::nth_element(s.begin(), s.begin() + long((s.size() - 1) / 2), s.end());
  return s[(s.size() - 1) / 2];
}

bool DraftPolicy::drafting_pays(int sequences, int fixed_tokens, double draft, int nodes, double gain) const {
  const double plain = double(sequences) / cost_->target_seconds(fixed_tokens);
  return double(sequences) * (1 + gain) / (draft + cost_->target_seconds(fixed_tokens + nodes * sequences)) > plain;
}

bool DraftPolicy::worth_drafting(int sequences, int fixed_tokens) {
  if (!cfg_.adaptive || sequences <= 0) return true;
  probing_ = false;
  if (++skipped_ >= probe_every_) {
    skipped_ = 0;
    probing_ = true;
    probe_every_ = std::min(2 * probe_every_, kMaxProbeEvery);
    return true;
  }
  const double draft = level_seconds();
  // One to four nodes per sequence, each level accepted with the first node's rate.
  double gain = 0, a = 1;
  for (int k = 1; k <= 4; ++k) {
    a *= first_hit_;
    gain += a;
    if (drafting_pays(sequences, fixed_tokens, draft, k, gain)) {
      skipped_ = 0;
      probe_every_ = kProbeEvery;
      return true;
    }
  }
  if (skipped_ == 1)
    spdlog::debug("auto: drafting off for {} sequences: first-node acceptance {:.2f}, draft level {:.2f} ms, "
                  "plain step {:.2f} ms; next probe in {} steps",
                  sequences, first_hit_, draft * 1e3, cost_->target_seconds(fixed_tokens) * 1e3, probe_every_);
  return false;
}

void DraftPolicy::trim(std::vector<DraftTree>& trees, std::vector<SeqState*>& states, int fixed_tokens,
                       double draft_seconds, int draft_levels) {
  if (!cfg_.adaptive) return;
  record_level_time(draft_seconds, draft_levels);
  // A probe is charged a typical level, not its own time, which folds in every skipped position.
  const double charged = probing_ ? level_seconds() * draft_levels : draft_seconds;
  std::vector<std::vector<double>> est(trees.size());
  // Best-first over sequences: each tree's nodes in order (every prefix is a tree).
  using Item = std::pair<double, size_t>;  // (estimate of the sequence's next node, sequence)
  std::priority_queue<Item> next;
  std::vector<int> taken(trees.size(), 0);
  for (size_t i = 0; i < trees.size(); ++i) {
    est[i] = estimates(*states[i], trees[i]);
    if (!est[i].empty()) next.push({est[i][0], i});
  }
  double gain = 0;
  const double roots = double(states.size());
  // The draft is already paid for, so keeping nodes is weighed against this step without them;
  // except on a probe, which drafted although drafting did not pay: its nodes must beat not
  // drafting at all, or a slow probe (a loaded machine) would make them look cheap.
  double best_rate = roots / ((probing_ ? 0.0 : draft_seconds) + cost_->target_seconds(fixed_tokens));
  std::vector<int> best_taken = taken;
  int n = 0;
  while (!next.empty()) {
    auto [e, i] = next.top();
    next.pop();
    gain += e;
    ++n;
    if (++taken[i] < int(est[i].size())) next.push({est[i][size_t(taken[i])], i});
    const double rate = (roots + gain) / (charged + cost_->target_seconds(fixed_tokens + n));
    if (rate > best_rate) {
      best_rate = rate;
      best_taken = taken;
    }
  }
  // A probe verifies at least its first nodes whatever the estimates say: they only move when
  // drafts are verified, and trimming the probe away on the estimates that switched drafting off
  // kept it off for good (a hard passage once left a Q4_0 run drafting for a third of its steps).
  // Unless even a sure first node would not pay (a compute-bound step): then acceptance is not
  // what keeps drafting off, and verifying would teach nothing.
  if (probing_ && drafting_pays(int(roots), fixed_tokens, charged, 1, 1.0))
    for (int& t : best_taken) t = std::max(t, 1);
  for (size_t i = 0; i < trees.size(); ++i) trees[i].truncate(best_taken[i]);
  if (!cfg_.whole_block) adapt_shapes(trees, est, states, best_rate);
}

// A level is worth drafting when its kept nodes bring more tokens than the step's rate would
// produce in the time its draft forward takes. One forward drafts a level for every sequence, so
// a level is judged by what the whole batch kept of it: judged per sequence, a batch of 16 never
// drafted past depth 1 (a level's 7 ms at ~280 tokens/s is 2 tokens, more than any one node
// brings) and served concurrency 16 below a fixed chain of 2.
void DraftPolicy::adapt_shapes(const std::vector<DraftTree>& trees, const std::vector<std::vector<double>>& est,
                               std::vector<SeqState*>& states, double rate) const {
  const double level_tokens = rate * level_seconds();
  // Each level's draft forward stays within one pass of 16-row tiles, where its rows cost about
  // what one does: at 16 sequences, width 2 to 4 drafted 4-5 levels of 32-64 rows to keep 2-3
  // nodes a sequence (auto 1.21-1.27x the plain batch, with width 1 1.32-1.36x; eaglet bench
  // --max-num-seqs 16, docs/performance.md). Alone, up to the configured topk.
  const int widest = std::min(cfg_.shape.topk, std::max(1, kDraftLevelRows / std::max(1, int(trees.size()))));
  std::vector<std::vector<int>> depths(trees.size());
  std::vector<double> kept_at(1, 0.0);  // by depth: the batch's expected tokens from kept nodes
  for (size_t i = 0; i < trees.size(); ++i) {
    depths[i] = trees[i].depths();
    for (int k = 0; k < trees[i].size(); ++k) {
      const size_t d = size_t(depths[i][size_t(k)]);
      if (d >= kept_at.size()) kept_at.resize(d + 1, 0.0);
      kept_at[d] += est[i][size_t(k)];
    }
  }
  for (size_t i = 0; i < trees.size(); ++i) {
    SeqState& s = *states[i];
    int kept_depth = 0;
    for (int d : depths[i]) kept_depth = std::max(kept_depth, d);
    const bool paid = kept_at[size_t(kept_depth)] >= level_tokens;
    std::vector<int> children(size_t(trees[i].size()) + 1, 0);
    for (int k = 0; k < trees[i].size(); ++k) ++children[size_t(trees[i].parents[size_t(k)] + 1)];
    const int width = children.empty() ? 0 : *std::max_element(children.begin(), children.end());
    if (kept_depth >= s.depth && paid) s.depth = std::min(s.depth + 1, cfg_.shape.depth);
    else if (kept_depth < s.depth || !paid) s.depth = std::max(s.depth - 1, 1);
    if (width >= s.topk) s.topk = std::min(s.topk + 1, widest);
    else if (width < s.topk - 1) s.topk = std::max(s.topk - 1, 1);
    s.topk = std::min(s.topk, widest);  // a batch that grew since
  }
}

void DraftPolicy::observe(SeqState& s, const DraftTree& tree, const std::vector<int>& path) {
  if (tree.empty()) return;
  const auto depths = tree.depths();
  const auto e = estimates(s, tree);
  std::vector<char> on_path(size_t(tree.size()), 0);
  for (int p : path) on_path[size_t(p)] = 1;
  // A probe's verdict stands for the steps skipped before it, so it moves the average more.
  const double w = probing_ ? kProbeWeight : kStepWeight;
  first_hit_ = (1 - w) * first_hit_ + w * on_path[0];
  s.predicted *= kSeqDecay;
  s.accepted *= kSeqDecay;
  for (int i = 0; i < tree.size(); ++i) {
    const int b = bin(tree, i, depths);
    seen_[size_t(b)] += 1;
    hits_[size_t(b)] += on_path[size_t(i)];
    s.predicted += e[size_t(i)];
    s.accepted += on_path[size_t(i)];
  }
}

}  // namespace eaglet
