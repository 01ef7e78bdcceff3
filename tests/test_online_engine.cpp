// The engine side of online training: captured sequences hold the target's own taps at every
// position the target ran, and a draft swapped in mid-generation (even a useless one) changes
// only the speed, never the output.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/engine_core.h"
#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "models/eagle3.h"
#include "runtime/draft_versions.h"
#include "support/synthetic_dflash.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

struct CollectSink : SampleSink {
  std::vector<CapturedSequence> got;
  void consume(CapturedSequence s) override { got.push_back(std::move(s)); }
};

struct Rig {
  test::TempDir dir;
  ModelBundle bundle;
  std::unique_ptr<SpecSetup> spec;
  // EAGLE-3 drafts draft4 and draft5 (serving draft4), or DFlash drafts of block 8 (k = 7).
  explicit Rig(DraftKind kind = DraftKind::Eagle3) {
    test::write_steered_byte_target(dir.file("target"));
    for (uint64_t seed : {4, 5}) {
      if (kind == DraftKind::Eagle3) write_draft(dir.file("draft" + std::to_string(seed)), seed, 0.3f);
      else test::write_dflash_draft(dir.file("draft" + std::to_string(seed)), dflash_config(), {}, seed);
    }
    bundle = load_bundle(dir.file("target"));
    SpecOptions so;
    so.method = kind == DraftKind::Eagle3 ? "eagle3" : "dflash";
    so.draft_dir = dir.file("draft4");
    so.num_speculative_tokens = kind == DraftKind::Eagle3 ? 3 : 7;
    spec = std::make_unique<SpecSetup>(so, *bundle.model);
  }
  static nlohmann::json dflash_config() { return test::dflash_draft_config(96, 4); }
  void write_draft(const std::string& d, uint64_t seed, float scale) {
    test::DraftSpec s;
    s.vocab = 259;
    s.draft_vocab = 3;
    s.scale = scale;
    s.seed = seed;
    test::write_draft(d, s);
  }
  std::shared_ptr<const ServedDraft> load(const std::string& d) {
    return ServedDraft::load(spec->served_draft()->kind(), d, *bundle.model);
  }
  std::unique_ptr<EngineCore> engine() {
    EngineOptions eo;
    eo.max_num_seqs = 4;
    eo.max_model_len = 256;
    return std::make_unique<EngineCore>(test::pool(), *bundle.model, bundle.tokenizer, *spec, eo);
  }
};

struct Output {
  std::vector<int> tokens;
  std::atomic<bool> done{false};  // set on the engine's thread (a scheduler's, in the last test)
};

std::shared_ptr<Request> request(const std::vector<int>& prompt, int max_tokens, Output* out, bool no_capture = false) {
  auto r = std::make_shared<Request>();
  r->prompt = prompt;
  r->sampling.temperature = 0;
  r->stop.max_tokens = max_tokens;
  r->stop.ignore_eos = true;
  r->no_capture = no_capture;
  r->on_output = [out](const std::string&, const std::vector<TokenLogprob>& t) {
    for (auto& x : t) out->tokens.push_back(x.token);
  };
  r->on_finish = [out](const std::string&, int) { out->done = true; };
  return r;
}

std::vector<int> plain_greedy(Rig& s, const std::vector<int>& prompt, int max_tokens) {
  auto g = std::make_shared<Request>();
  g->prompt = prompt;
  g->sampling.temperature = 0;
  g->stop.max_tokens = max_tokens;
  g->stop.ignore_eos = true;
  return generate(test::pool(), *s.bundle.model, s.bundle.tokenizer, g).token_ids;
}

const std::vector<std::vector<int>> kPrompts = {{1, 66, 98, 99}, {1, 84, 104, 101, 32}, {1, 79, 110}};

// Swaps at a step where every sequence is mid-generation, to a second draft and then to a noisy
// one that is nearly never right: each sequence's draft state is rebuilt from its history and
// drafting goes on, and every output equals plain greedy decoding.
TEST(OnlineEngine, DraftSwapsMidGenerationKeepTheOutputExact) {
  Rig s;
  s.write_draft(s.dir.file("noise"), 77, 3.0f);
  auto e = s.engine();
  CollectSink sink;
  e->capture({&sink, 1.0, 2048, 0});
  std::vector<Output> out(kPrompts.size());
  for (size_t i = 0; i < kPrompts.size(); ++i) ASSERT_TRUE(e->try_add(request(kPrompts[i], 48, &out[i])));
  for (int i = 0; i < 6; ++i) e->step();
  const int64_t before = e->spec_metrics().num_drafts;
  ASSERT_GT(before, 0);
  for (auto& o : out) ASSERT_FALSE(o.done);
  e->swap_draft(s.load(s.dir.file("draft5")), 1);
  for (int i = 0; i < 5; ++i) e->step();
  const int64_t mid = e->spec_metrics().num_drafts;
  EXPECT_GT(mid, before);  // drafting went on with the new draft
  e->swap_draft(s.load(s.dir.file("noise")), 2);
  EXPECT_EQ(e->draft_version(), 2);
  while (e->has_work()) e->step();
  EXPECT_GT(e->spec_metrics().num_drafts, mid);
  for (size_t i = 0; i < kPrompts.size(); ++i) EXPECT_EQ(out[i].tokens, plain_greedy(s, kPrompts[i], 48)) << i;
  ASSERT_EQ(sink.got.size(), kPrompts.size());
  for (auto& c : sink.got) EXPECT_EQ(c.draft_version, 2);
}

// Rebuilding is faithful: swapping a draft for itself mid-generation drafts and accepts exactly
// what an engine that never swapped does.
TEST(OnlineEngine, SwappingInTheSameDraftChangesNoDraft) {
  Rig s;
  auto run = [&](bool swap) {
    auto e = s.engine();
    CollectSink sink;
    e->capture({&sink, 1.0, 2048, 0});
    std::vector<Output> out(kPrompts.size());
    for (size_t i = 0; i < kPrompts.size(); ++i) EXPECT_TRUE(e->try_add(request(kPrompts[i], 40, &out[i])));
    for (int i = 0; i < 5; ++i) e->step();
    if (swap) e->swap_draft(s.load(s.dir.file("draft4")), 1);
    while (e->has_work()) e->step();
    const SpecMetrics& m = e->spec_metrics();
    return std::vector<int64_t>{m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens};
  };
  const auto plain = run(false);
  EXPECT_GT(plain[2], 0);
  EXPECT_EQ(run(true), plain);
}

// Without capture() an engine keeps no history: a swap leaves its running sequences to plain
// decoding (still exact) and drafts for the sequences that start after it.
TEST(OnlineEngine, SwapWithoutHistoryFallsBackToPlainDecoding) {
  Rig s;
  auto e = s.engine();
  Output a, b;
  ASSERT_TRUE(e->try_add(request(kPrompts[0], 32, &a)));
  for (int i = 0; i < 4; ++i) e->step();
  e->swap_draft(s.load(s.dir.file("draft5")), 1);
  ASSERT_TRUE(e->try_add(request(kPrompts[1], 32, &b)));
  const int64_t before = e->spec_metrics().num_drafts;
  while (e->has_work()) e->step();
  EXPECT_GT(e->spec_metrics().num_drafts, before);
  EXPECT_EQ(a.tokens, plain_greedy(s, kPrompts[0], 32));
  EXPECT_EQ(b.tokens, plain_greedy(s, kPrompts[1], 32));
}

// A DFlash draft swaps the same way: its context cache is rebuilt from each sequence's history
// (swapping a draft for itself changes no draft), and another draft of the same shape keeps every
// output exact.
TEST(OnlineEngine, DFlashDraftSwapsRebuildTheContextAndKeepTheOutputExact) {
  Rig s(DraftKind::DFlash);
  auto run = [&](const std::string& swap_to, std::vector<Output>& out) {
    auto e = s.engine();
    CollectSink sink;
    e->capture({&sink, 1.0, 2048, 0});
    for (size_t i = 0; i < kPrompts.size(); ++i) EXPECT_TRUE(e->try_add(request(kPrompts[i], 40, &out[i])));
    for (int i = 0; i < 3; ++i) e->step();
    for (auto& o : out) EXPECT_FALSE(o.done);
    if (!swap_to.empty()) e->swap_draft(s.load(s.dir.file(swap_to)), 1);
    while (e->has_work()) e->step();
    EXPECT_EQ(sink.got.size(), kPrompts.size());
    const SpecMetrics& m = e->spec_metrics();
    return std::vector<int64_t>{m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens};
  };
  std::vector<Output> plain(kPrompts.size()), same(kPrompts.size()), other(kPrompts.size());
  const auto unswapped = run("", plain);
  EXPECT_GT(unswapped[2], 0);
  EXPECT_EQ(run("draft4", same), unswapped);
  const auto swapped = run("draft5", other);
  EXPECT_NE(swapped, unswapped);  // another draft drafted after the swap
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const std::vector<int> want = plain_greedy(s, kPrompts[i], 40);
    EXPECT_EQ(plain[i].tokens, want) << i;
    EXPECT_EQ(same[i].tokens, want) << i;
    EXPECT_EQ(other[i].tokens, want) << i;
  }
}

// A draft that cannot take the serving one's place (another kind, another block) is refused by
// what differs, and the engine goes on with the draft it had.
TEST(OnlineEngine, SwapsToADraftOfAnotherKindOrShapeAreRefused) {
  Rig s(DraftKind::DFlash);
  s.write_draft(s.dir.file("eagle3"), 4, 0.3f);
  nlohmann::json wide_block = Rig::dflash_config();
  wide_block["block_size"] = 16;
  test::write_dflash_draft(s.dir.file("block16"), wide_block);
  auto e = s.engine();
  test::expect_mentions(test::error_of([&] { e->swap_draft(ServedDraft::load(DraftKind::Eagle3, s.dir.file("eagle3"), *s.bundle.model), 1); }),
                        {"eagle3", "dflash"});
  test::expect_mentions(test::error_of([&] { e->swap_draft(s.load(s.dir.file("block16")), 1); }), {"block", "16", "8"});
  EXPECT_EQ(e->draft_version(), 0);
  Output out;
  ASSERT_TRUE(e->try_add(request(kPrompts[0], 24, &out)));
  while (e->has_work()) e->step();
  EXPECT_EQ(out.tokens, plain_greedy(s, kPrompts[0], 24));
}

// A captured sequence: the tokens the target ran over, their taps as a plain prefill of those
// tokens computes them, and the loss mask over the generated part.
TEST(OnlineEngine, CapturedSequencesHoldTheTargetsTapsAtEveryPosition) {
  Rig s;
  auto e = s.engine();
  CollectSink sink;
  e->capture({&sink, 1.0, 2048, 0});
  Output out, hidden;
  ASSERT_TRUE(e->try_add(request(kPrompts[1], 24, &out)));
  ASSERT_TRUE(e->try_add(request(kPrompts[0], 24, &hidden, /*no_capture=*/true)));  // X-Eaglet-No-Train
  while (e->has_work()) e->step();
  ASSERT_EQ(sink.got.size(), 1u);
  const CapturedSequence& c = sink.got[0];
  const std::vector<int>& P = kPrompts[1];
  std::vector<int> want = P;
  want.insert(want.end(), out.tokens.begin(), out.tokens.end() - 1);  // the last token was never run
  EXPECT_EQ(c.ids, want);
  EXPECT_EQ(c.prompt_tokens, int(P.size()));
  ASSERT_EQ(c.loss_mask.size(), want.size());
  for (size_t t = 0; t < want.size(); ++t) EXPECT_EQ(c.loss_mask[t], t + 1 >= P.size() ? 1 : 0) << t;
  // The reference: one prefill over the same tokens, tapping the draft's layers and the last one.
  Model& m = *s.bundle.model;
  std::vector<int> layers = s.spec->draft()->config().aux_layers;
  layers.push_back(m.config().num_layers);
  KvCache cache(m.kv_shape(kv_blocks_for(int64_t(want.size()))));
  std::vector<float> taps;
  prefill(test::pool(), m, cache, cache.create(), want, 512, layers, &taps);
  const size_t H = size_t(m.config().hidden), T = want.size();
  ASSERT_EQ(c.aux.size(), T * 3 * H);
  ASSERT_EQ(c.last.size(), T * H);
  double worst = 0;
  for (size_t t = 0; t < T; ++t)
    for (size_t j = 0; j < 4 * H; ++j) {
      const float got = j < 3 * H ? c.aux[t * 3 * H + j] : c.last[t * H + j - 3 * H];
      worst = std::max(worst, double(std::abs(got - taps[t * 4 * H + j])));
    }
  EXPECT_LT(worst, 1e-4);
}

TEST(OnlineEngine, CaptureFractionZeroCapturesNothing) {
  Rig s;
  auto e = s.engine();
  CollectSink sink;
  e->capture({&sink, 0.0, 2048, 0});
  Output out;
  ASSERT_TRUE(e->try_add(request(kPrompts[2], 16, &out)));
  while (e->has_work()) e->step();
  EXPECT_TRUE(sink.got.empty());
  EXPECT_EQ(out.tokens, plain_greedy(s, kPrompts[2], 16));
}

// Serves `n` greedy requests through the scheduler and waits for them.
void serve(Scheduler& sched, int n, int first = 0) {
  std::vector<Output> out(static_cast<size_t>(n));
  std::vector<std::shared_ptr<Request>> reqs;
  for (int i = 0; i < n; ++i) {
    reqs.push_back(request({1, 65 + (first + i) % 26, 97 + (first + i) * 7 % 26, 32}, 40, &out[size_t(i)]));
    while (!sched.submit(reqs.back())) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& o : out)
    while (!o.done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// A version that serves worse than the one before it (live acceptance, once it has served enough
// drafts) is rolled back on its own; one that serves as well stays.
// A scheduler serving the rig's draft4 as version 0, its metrics counted per draft version, as
// `serve --online-train` runs it.
struct VersionedServing {
  ServingMetrics metrics;
  Scheduler sched;
  std::unique_ptr<DraftVersions> versions;
  VersionedServing(Rig& s, DraftVersions::Options o) : sched(test::pool(), s.bundle, *s.spec, options(), metrics) {
    metrics.enable_online_training();
    DraftHistory history;
    history.entries.push_back({0, s.dir.file("draft4")});
    versions = std::make_unique<DraftVersions>(sched, metrics, s.spec->served_draft(), history, "",
                                               [&s](const std::string& d) { return s.load(d); }, o);
  }
  static SchedulerOptions options() {
    SchedulerOptions so;
    so.max_num_seqs = 4;
    so.max_model_len = 256;
    return so;
  }
};

TEST(OnlineEngine, AVersionThatServesWorseIsRolledBack) {
  Rig s;
  s.write_draft(s.dir.file("noise"), 77, 3.0f);
  VersionedServing vs(s, {.judge_drafts = 150, .max_drop = 0.1});
  ServingMetrics& metrics = vs.metrics;
  Scheduler& sched = vs.sched;
  DraftVersions& v = *vs.versions;
  sched.run_on_engine([](EngineCore& e) { e.capture({}); });  // history only (swaps rebuild from it)
  std::vector<int> rolled_to;
  v.on_rollback = [&](int version, const std::string&) { rolled_to.push_back(version); };
  serve(sched, 12);
  ASSERT_GE(metrics.version_metrics(0).num_drafts, 150);
  v.install(s.load(s.dir.file("noise")), s.dir.file("noise"), 1, "test");
  for (int i = 0; metrics.version_metrics(1).num_drafts < 150 && i < 20; ++i) serve(sched, 4, 12 + 4 * i);
  v.check();
  EXPECT_EQ(rolled_to, std::vector<int>{0});
  EXPECT_EQ(v.current(), 0);
  EXPECT_LT(metrics.version_metrics(1).mean_acceptance_length(), metrics.version_metrics(0).mean_acceptance_length() - 0.1);
  EXPECT_NE(metrics.render("m").find("eaglet:draft_rollbacks_total{model_name=\"m\",engine=\"0\"} 1"), std::string::npos);
  // A candidate judged against version 1 arrives after the rollback: not swapped in.
  EXPECT_FALSE(v.install(s.load(s.dir.file("draft5")), s.dir.file("draft5"), 3, "stale", /*based_on=*/1));
  EXPECT_EQ(v.current(), 0);
  // The same draft again, as version 2: judged and kept.
  EXPECT_TRUE(v.install(s.load(s.dir.file("draft4")), s.dir.file("draft4"), 2, "test", /*based_on=*/0));
  // On version 0's own traffic again: its last drafts, which the judgement compares with, came
  // from these requests (other prompts would differ by more than max_drop on this tiny target).
  serve(sched, 12);
  ASSERT_GE(metrics.version_metrics(2).num_drafts, 150);
  v.check();
  EXPECT_EQ(v.current(), 2);
  EXPECT_EQ(rolled_to.size(), 1u);
  sched.shutdown();
}

// The automatic judgement compares a new version's drafts with its predecessor's latest ones,
// not with its whole-life mean: traffic that turned harder for both is not held against the new
// version (before, its whole-life mean rolled such a version back), while one that serves worse
// than its predecessor did just before it still goes. /metrics shows each version's recent
// acceptance and accepted tokens.
TEST(OnlineEngine, AVersionIsJudgedAgainstItsPredecessorsLatestDrafts) {
  Rig s;
  VersionedServing vs(s, {.judge_drafts = 100, .max_drop = 0.1});
  ServingMetrics& metrics = vs.metrics;
  DraftVersions& v = *vs.versions;
  auto drafts = [&](int n, int accepted) {
    for (int i = 0; i < n; ++i) metrics.spec_step(3, accepted, 3);
  };
  drafts(1000, 3);  // easy traffic: acceptance length 4
  drafts(100, 1);   // then harder: 2
  EXPECT_DOUBLE_EQ(metrics.recent_acceptance(0).acceptance_length, 2.0);
  EXPECT_GT(metrics.version_metrics(0).mean_acceptance_length(), 3.8);
  ASSERT_TRUE(v.install(s.load(s.dir.file("draft5")), s.dir.file("draft5"), 1, "test"));
  drafts(100, 1);  // as good as version 0 is now
  v.check();
  EXPECT_EQ(v.current(), 1);
  ASSERT_TRUE(v.install(s.load(s.dir.file("draft4")), s.dir.file("draft4"), 2, "test"));
  drafts(100, 0);  // 1.0 < 2.0 - 0.1
  v.check();
  EXPECT_EQ(v.current(), 1);
  const std::string text = metrics.render("m");
  EXPECT_NE(text.find("eaglet:spec_decode_recent_acceptance_length{model_name=\"m\",engine=\"0\",version=\"1\"} 2\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("eaglet:spec_decode_num_accepted_tokens_by_version{model_name=\"m\",engine=\"0\",version=\"0\"} 3100\n"),
            std::string::npos) << text;
  vs.sched.shutdown();
}

}  // namespace
}  // namespace eaglet
