// The auto draft policy's decisions that the engine-core tests do not pin down on their own.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "core/error.h"
#include "speculation/draft_policy.h"

namespace eaglet {
namespace {

// A memory-bound target: 16 tokens cost little more than one, so drafting pays whenever the
// draft itself is cheap.
std::shared_ptr<const CostModel> flat_cost() {
  return std::make_shared<const CostModel>(std::vector<std::pair<int, double>>{{1, 0.05}, {64, 0.06}});
}

// Reported draft seconds for one level, as the engine does after each drafted step.
void draft_took(DraftPolicy& p, double seconds) {
  std::vector<DraftTree> none;
  std::vector<DraftPolicy::SeqState*> states;
  p.trim(none, states, 1, seconds, 1);
}

TEST(DraftPolicy, ColdOrStalledDraftForwardDoesNotSwitchSpeculationOffForGood) {
  DraftPolicy p(parse_draft_shape("auto", -1), flat_cost(), true);
  ASSERT_TRUE(p.worth_drafting(1, 1));
  // The first draft forward faults its weights in and folds whole prompts in: not a level's cost.
  draft_took(p, 5.0);
  EXPECT_TRUE(p.worth_drafting(1, 1));
  // A later one stalls (the VM): 5 s for one level.
  draft_took(p, 5.0);
  EXPECT_FALSE(p.worth_drafting(1, 1));
  // Within kProbeEvery steps one step drafts anyway; a normal draft forward then restores it.
  int until_probe = 1;
  while (until_probe <= 1000 && !p.worth_drafting(1, 1)) ++until_probe;
  ASSERT_LE(until_probe, DraftPolicy::kProbeEvery);
  draft_took(p, 0.002);
  for (int step = 0; step < 3 * DraftPolicy::kProbeEvery; ++step) {
    ASSERT_TRUE(p.worth_drafting(1, 1)) << "step " << step;
    // One stall among normal forwards moves nothing.
    draft_took(p, step == 5 ? 5.0 : 0.002);
  }
}

// Probes come after 16 skipped steps, then 32, 64, ... up to 256 while drafting keeps not paying
// (each probe costs more than a plain step), and every 16 again once drafting has paid.
TEST(DraftPolicy, ADraftSlowerThanItsGainIsSkippedExceptForProbesThatBackOff) {
  DraftPolicy p(parse_draft_shape("auto", -1), flat_cost(), true);
  for (int i = 0; i < 9; ++i) draft_took(p, 1.0);  // 20 plain steps' time per level
  std::vector<int> probes;
  for (int step = 1; step <= 1500; ++step)
    if (p.worth_drafting(1, 1)) probes.push_back(step);
  EXPECT_EQ(probes, (std::vector<int>{16, 48, 112, 240, 496, 752, 1008, 1264}));
  // The draft becomes cheap (a lighter machine): the next probe restores drafting on merit...
  for (int i = 0; i < 9; ++i) draft_took(p, 0.002);
  int step = 0;
  while (step < 300 && !p.worth_drafting(1, 1)) ++step;
  ASSERT_LT(step, 300);
  EXPECT_TRUE(p.worth_drafting(1, 1));
  // ... and when it stops paying again, probing starts over at 16.
  for (int i = 0; i < 9; ++i) draft_took(p, 1.0);
  int until_probe = 1;
  while (until_probe <= 1000 && !p.worth_drafting(1, 1)) ++until_probe;
  EXPECT_EQ(until_probe, DraftPolicy::kProbeEvery);
}

// One drafted step of a one-node chain with draft probability `score`: trimmed, then verified
// (accepted or not). Returns the nodes the policy kept.
int drafted_step(DraftPolicy& p, DraftPolicy::SeqState& s, float score, bool accepted) {
  DraftTree t;
  t.add(7, -1, score);
  std::vector<DraftTree> trees{t};
  std::vector<DraftPolicy::SeqState*> states{&s};
  p.trim(trees, states, 1, 0.02, 1);
  const int kept = trees[0].size();
  if (kept > 0) p.observe(s, trees[0], accepted ? std::vector<int>{0} : std::vector<int>{});
  return kept;
}

// A hard passage drives the acceptance estimates down until drafting stops; the probes must then
// verify what they draft, or the estimates never move again (a probe trimmed away on the very
// estimates that stopped drafting once kept a Q4_0 run plain for most of its steps).
TEST(DraftPolicy, ProbesVerifyTheirFirstNodeSoDraftingComesBackWhenTheDraftRecovers) {
  DraftPolicy p(parse_draft_shape("auto", -1), flat_cost(), true);
  DraftPolicy::SeqState s = p.new_sequence();
  int step = 0;
  while (step < 500 && p.worth_drafting(1, 1)) {
    drafted_step(p, s, 0.1f, false);
    ++step;
  }
  ASSERT_LT(step, 500) << "rejected drafts never switched drafting off";
  // The draft does well again: every probe's node is accepted.
  int probes = 0;
  for (step = 0; step < 400; ++step) {
    if (!p.worth_drafting(1, 1)) continue;
    ++probes;
    ASSERT_EQ(drafted_step(p, s, 0.1f, true), 1) << "probe " << probes << " verified nothing";
    if (probes >= 2 && p.worth_drafting(1, 1)) break;  // drafting on merit, not a probe
  }
  EXPECT_LT(step, 400) << "drafting did not come back after " << probes << " accepted probes";
  EXPECT_LE(probes, 4);
}

// A batch of 16 on a compute-bound curve (the 17th row opens a second row of tiles), as served
// at concurrency 16 on AMX. Bad drafts switch drafting off; then each probe's draft call takes
// ten levels' time, folding in every position skipped since. Charged at that time, the probe's
// nodes never paid, nothing was verified and drafting stayed off for the rest of the run
// (`eaglet bench --max-num-seqs 16`: 1.14x against 1.30x for a fixed chain of one).
TEST(DraftPolicy, ABatchComesBackToDraftingAlthoughProbesFoldInTheSkippedSteps) {
  auto tiles = std::make_shared<const CostModel>(
      std::vector<std::pair<int, double>>{{1, 0.068}, {16, 0.080}, {17, 0.088}, {32, 0.103}, {33, 0.118}, {64, 0.149}});
  DraftPolicy p(parse_draft_shape("auto", -1), tiles, true);
  constexpr int kSeqs = 16;
  std::vector<DraftPolicy::SeqState> seqs(kSeqs, p.new_sequence());
  // One step: a one-node chain per sequence, drafted in `seconds`, then verified. Returns the
  // nodes kept.
  auto step = [&](double seconds, bool accepted) {
    std::vector<DraftTree> trees(kSeqs);
    std::vector<DraftPolicy::SeqState*> states;
    for (int i = 0; i < kSeqs; ++i) {
      trees[size_t(i)].add(7, -1, 0.9f);
      states.push_back(&seqs[size_t(i)]);
    }
    p.trim(trees, states, kSeqs, seconds, 1);
    int kept = 0;
    for (int i = 0; i < kSeqs; ++i) {
      kept += trees[size_t(i)].size();
      if (!trees[size_t(i)].empty())
        p.observe(seqs[size_t(i)], trees[size_t(i)], accepted ? std::vector<int>{0} : std::vector<int>{});
    }
    return kept;
  };
  int n = 0;
  for (; n < 500 && p.worth_drafting(kSeqs, kSeqs); ++n) step(0.007, false);
  ASSERT_LT(n, 500) << "rejected drafts never switched drafting off";
  int probes = 0;
  for (n = 0; n < 2000; ++n) {
    if (!p.worth_drafting(kSeqs, kSeqs)) continue;
    ++probes;
    ASSERT_GT(step(0.070, true), 0) << "probe " << probes << " verified nothing";
    if (p.worth_drafting(kSeqs, kSeqs)) break;  // drafting on merit
  }
  EXPECT_LT(n, 2000) << "drafting did not come back after " << probes << " accepted probes";
  EXPECT_LE(probes, 4);
  // Back on: normal draft calls keep it on.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(p.worth_drafting(kSeqs, kSeqs)) << "step " << i;
    EXPECT_EQ(step(0.007, true), kSeqs);
  }
}

// One drafted step of a batch: `draft` builds each sequence's tree from its state, then trim()
// with the step's draft time and levels. Returns the trimmed trees.
std::vector<DraftTree> trim_batch(DraftPolicy& p, std::vector<DraftPolicy::SeqState>& state, double draft_seconds,
                                  int levels, const std::function<void(const DraftPolicy::SeqState&, DraftTree&)>& draft) {
  std::vector<DraftTree> trees(state.size());
  std::vector<DraftPolicy::SeqState*> states;
  for (size_t i = 0; i < state.size(); ++i) {
    draft(state[i], trees[i]);
    states.push_back(&state[i]);
  }
  p.trim(trees, states, int(state.size()), draft_seconds, levels);
  return trees;
}

// Sixteen sequences share each draft forward, so a level pays when the batch's kept nodes at
// that depth bring more than the forward's time is worth, though no one sequence's node does:
// on a flat cost curve a batch drafts at least as deep as one sequence alone (it stayed at 1).
TEST(DraftPolicy, ABatchJudgesALevelByWhatAllItsSequencesKeptOfIt) {
  std::vector<int> depths;
  for (int seqs : {1, 16}) {
    DraftPolicy p(parse_draft_shape("auto:topk=1", -1), flat_cost(), true);
    std::vector<DraftPolicy::SeqState> state(size_t(seqs), p.new_sequence());
    for (int step = 0; step < 12; ++step) {
      // A chain of likely nodes per sequence, every one accepted; 20 ms a level.
      const std::vector<DraftTree> trees = trim_batch(p, state, 0.02 * 4, 4, [](const DraftPolicy::SeqState& s, DraftTree& t) {
        double path = 1;
        for (int d = 0; d < s.depth; ++d) t.add(d, d - 1, float(path *= 0.97));
      });
      for (int i = 0; i < seqs; ++i) {
        std::vector<int> path(size_t(trees[size_t(i)].size()));
        for (size_t k = 0; k < path.size(); ++k) path[k] = int(k);
        p.observe(state[size_t(i)], trees[size_t(i)], path);
      }
    }
    for (const auto& s : state) EXPECT_EQ(s.depth, state[0].depth) << seqs << " sequences";
    depths.push_back(state[0].depth);
  }
  EXPECT_GE(depths[0], 5);
  EXPECT_GE(depths[1], depths[0]);
}

// Width multiplies every draft level's rows: it grows while nodes keep every child drafted, but a
// level of the whole batch stays within 16 rows (one pass of tiles).
TEST(DraftPolicy, WidthKeepsADraftLevelOfTheBatchWithinSixteenRows) {
  for (auto [seqs, widest] : {std::pair{1, 4}, {4, 4}, {8, 2}, {16, 1}}) {
    DraftPolicy p(parse_draft_shape("auto", -1), flat_cost(), true);
    std::vector<DraftPolicy::SeqState> state(size_t(seqs), p.new_sequence());
    for (int step = 0; step < 8; ++step)  // topk likely children of the root per sequence
      trim_batch(p, state, 0.001, 1, [](const DraftPolicy::SeqState& s, DraftTree& t) {
        for (int c = 0; c < s.topk; ++c) t.add(c, -1, 0.9f);
      });
    for (const auto& s : state) EXPECT_EQ(s.topk, widest) << seqs << " sequences";
  }
}

// A block draft (DFlash): every step asks for the whole block whatever came before, and the cost
// curve alone decides how much of it is verified: all of it where 16 tokens cost about one, the
// prefix with the best rate where each token costs a fifth of a step.
TEST(DraftPolicy, BlockDraftsAskForTheWholeBlockAndTheCostCurveCutsIt) {
  DraftPolicyConfig cfg = parse_draft_shape("auto", -1);
  cfg.whole_block = true;
  cfg.shape = {1, 15, 15};
  DraftTree block;
  double path = 1;
  for (int k = 0; k < 15; ++k) block.add(k, k - 1, float(path *= 0.8));
  const auto steep = std::make_shared<const CostModel>(std::vector<std::pair<int, double>>{{1, 0.05}, {64, 0.68}});
  for (const auto& cost : {flat_cost(), steep}) {
    DraftPolicy p(cfg, cost, true);
    DraftPolicy::SeqState s = p.new_sequence();
    EXPECT_EQ(p.shape(s, 100).depth, 15);
    EXPECT_EQ(p.shape(s, 6).depth, 6);  // tokens left or context room
    std::vector<DraftTree> trees{block};
    std::vector<DraftPolicy::SeqState*> states{&s};
    const std::vector<double> est = p.estimates(s, block);
    p.trim(trees, states, 1, 0.01, 1);
    int best = 0;
    double best_rate = 1 / (0.01 + cost->target_seconds(1)), gain = 0;
    for (int n = 1; n <= 15; ++n) {
      gain += est[size_t(n - 1)];
      const double rate = (1 + gain) / (0.01 + cost->target_seconds(1 + n));
      if (rate > best_rate) best_rate = rate, best = n;
    }
    EXPECT_EQ(trees[0].size(), best);
    if (cost == steep) EXPECT_TRUE(best > 1 && best < 15) << best;
    else EXPECT_EQ(best, 15);
    EXPECT_EQ(p.shape(s, 100).depth, 15);  // nothing per sequence to adapt
  }
}

TEST(DraftPolicy, ShapeSpecsParseAndBadOnesNameTheItem) {
  const DraftPolicyConfig a = parse_draft_shape("auto", -1);
  EXPECT_TRUE(a.adaptive);
  // One AMX tile pass holds 32 rows: the largest auto tree and its root.
  EXPECT_EQ(a.shape.budget + 1, 32);
  const DraftPolicyConfig capped = parse_draft_shape("auto:topk=2,depth=6", -1);
  EXPECT_TRUE(capped.adaptive);
  EXPECT_EQ(capped.shape.topk, 2);
  EXPECT_EQ(capped.shape.depth, 6);
  EXPECT_EQ(capped.shape.budget, a.shape.budget);
  const DraftPolicyConfig fixed = parse_draft_shape("tree:topk=3,budget=9", -1);
  EXPECT_FALSE(fixed.adaptive);
  EXPECT_EQ(fixed.shape.topk, 3);
  EXPECT_EQ(fixed.shape.depth, 5);
  EXPECT_EQ(fixed.shape.budget, 9);
  EXPECT_FALSE(parse_draft_shape("chain", 3).adaptive);
  try {
    parse_draft_shape("auto:width=2", -1);
    FAIL() << "accepted auto:width=2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'width=2'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_draft_shape("auto:topk=9", -1), Error);
  EXPECT_THROW(parse_draft_shape("autox", -1), Error);
}

}  // namespace
}  // namespace eaglet
