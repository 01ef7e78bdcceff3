// Online training (`serve --online-train`): the trainer learns from sequences the engine captured,
// its guard passes candidates that score at least the serving draft and turns down broken ones,
// it resumes from its checkpoint, and the server wires it all up (metrics, rollback, exactness).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/engine_core.h"
#include "cache/kv_cache.h"
#include "train/objective.h"
#include "models/prefill.h"
#include "io/mapped_file.h"
#include "engine/generator.h"
#include "engine/offline.h"
#include "engine/model_bundle.h"
#include "models/dflash.h"
#include "models/eagle3.h"
#include "support/raw_http.h"
#include "support/server_process.h"
#include "support/synthetic_dflash.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"
#include "support/train_fixture.h"
#include "train/draft_io.h"
#include "train/online_trainer.h"
#include "train/torch_threads.h"

namespace eaglet {
namespace {

using json = nlohmann::json;

struct Rig {
  test::TempDir dir;
  ModelBundle bundle;
  std::unique_ptr<SpecSetup> spec;
  // An EAGLE-3 draft of `draft_vocab` tokens (k = 3), or a DFlash draft of block 8 (k = 7).
  explicit Rig(int draft_vocab = 3, DraftKind kind = DraftKind::Eagle3) {
    test::write_steered_byte_target(dir.file("target"));
    test::DraftSpec s;
    s.vocab = 259;
    s.draft_vocab = draft_vocab;
    s.scale = 0.3f;
    s.seed = 4;
    if (kind == DraftKind::Eagle3) test::write_draft(dir.file("draft"), s);
    else test::write_dflash_draft(dir.file("draft"), test::dflash_draft_config(96, 4));
    bundle = load_bundle(dir.file("target"));
    SpecOptions so;
    so.method = kind == DraftKind::Eagle3 ? "eagle3" : "dflash";
    so.draft_dir = dir.file("draft");
    so.num_speculative_tokens = kind == DraftKind::Eagle3 ? 3 : 7;
    spec = std::make_unique<SpecSetup>(so, *bundle.model);
  }
  // Serves `n` greedy requests through an engine that captures them into `sink`.
  void serve(SampleSink* sink, int n, int tokens = 40) {
    OfflineEngine e(test::pool(), *bundle.model, bundle.tokenizer, spec.get(), 4 + tokens, 8);
    e.core().capture({sink, 1.0, 2048, 0});
    std::vector<std::shared_ptr<Request>> requests;
    for (int i = 0; i < n; ++i) {
      auto r = std::make_shared<Request>();
      r->prompt = {1, 65 + i % 26, 97 + (i * 7) % 26, 32};
      r->sampling.temperature = 0;
      r->stop.max_tokens = tokens;
      r->stop.ignore_eos = true;
      requests.push_back(std::move(r));
    }
    e.run_all(requests);
  }
  OnlineTrainOptions options(const std::string& out) const {
    OnlineTrainOptions o;
    o.dir = out;
    o.nice = 0;
    o.max_cpu_share = 1.0;
    o.batch_size = 4;
    o.lr = 3e-3;
    o.eval_every = 10;
    o.eval_samples = 12;
    o.eval_share = 0.25;
    o.min_eval_samples = 4;
    o.save_every = 10;
    return o;
  }
};

bool wait_for(const std::function<bool()>& done, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(int(seconds * 1000));
  while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return done();
}

// The candidates a trainer offers, each installed.
struct Offers {
  std::vector<OnlineTrainer::Candidate> all;
  std::mutex mu;
  OnlineTrainer::Hooks hooks() {
    OnlineTrainer::Hooks h;
    h.install = [this](const OnlineTrainer::Candidate& c) {
      std::lock_guard<std::mutex> lk(mu);
      all.push_back(c);
      return true;
    };
    return h;
  }
};

TEST(OnlineTrainer, LearnsFromCapturedTrafficAndOffersLoadableCandidates) {
  Rig r;
  Offers offers;
  const std::vector<OnlineTrainer::Candidate>& offered = offers.all;
  const OnlineTrainer::Hooks hooks = offers.hooks();
  OnlineTrainer t(*r.bundle.model, r.dir.file("draft"), 0, r.options(r.dir.file("online")), hooks);
  t.start();
  r.serve(&t, 64);
  ASSERT_TRUE(wait_for([&] { return t.stats().accepted >= 2; }, 120)) << t.stats().steps << " steps";
  t.stop();
  const OnlineTrainStats st = t.stats();
  EXPECT_EQ(st.samples_seen, 64);
  EXPECT_GT(st.samples_trained, 0);
  EXPECT_EQ(st.serving_version, offered.back().version);
  for (auto& c : offered) EXPECT_GE(c.candidate_score, c.serving_score);
  // Each version is an export the engine (and vLLM, SGLang) loads, left whole (no .tmp folder).
  for (auto& c : offered) EXPECT_NO_THROW(Eagle3Draft::load(c.dir, *r.bundle.model)) << c.dir;
  for (auto& c : offered) EXPECT_FALSE(std::filesystem::exists(c.dir + ".tmp"));
  // Training helped on this traffic: the last candidate beats the draft it started from.
  EXPECT_GT(offered.back().candidate_score, offered.front().serving_score);
  // A restart resumes the step count and the version numbering.
  OnlineTrainer again(*r.bundle.model, offered.back().dir, offered.back().version, r.options(r.dir.file("online")), {});
  EXPECT_GE(again.stats().steps, st.steps - st.steps % 10);
  EXPECT_GT(again.stats().steps, 0);
}

// While the engine is busy the trainer keeps to its busy share instead of stopping (before, a
// saturated server never learned); a busy share of 0 pauses it, as an operator may ask.
TEST(OnlineTrainer, KeepsLearningWhileTheEngineIsBusyWithinItsBusyShare) {
  for (const double share : {0.5, 0.0}) {
    Rig r;
    OnlineTrainer::Hooks hooks;
    hooks.busy = [] { return true; };
    std::atomic<int> taken{0}, held{0};  // the engine's thread, taken for each busy step and given back
    hooks.take_core = [&](bool take) {
      if (take) ++taken;
      held += take ? 1 : -1;
    };
    OnlineTrainOptions o = r.options(r.dir.file("online"));
    o.busy_cpu_share = share;
    OnlineTrainer t(*r.bundle.model, r.dir.file("draft"), 0, o, hooks);
    t.start();
    r.serve(&t, 24);
    if (share > 0) {
      ASSERT_TRUE(wait_for([&] { return t.stats().steps >= 5; }, 120)) << t.stats().steps << " steps";
      const OnlineTrainStats st = t.stats();
      EXPECT_GT(st.busy_train_seconds, 0);
      EXPECT_DOUBLE_EQ(st.busy_train_seconds, st.train_seconds);  // busy all along
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      EXPECT_EQ(t.stats().steps, 0);
    }
    t.stop();
    EXPECT_EQ(taken.load(), t.stats().steps);
    EXPECT_EQ(held.load(), 0);
  }
}

// The trainer's thread count bounds the BLAS under libtorch too: OpenBLAS kept its own threads
// (as many as cores), and one of them spun on the serving engine's core between products.
TEST(OnlineTrainer, HoldsTheBlasToItsThreads) {
  if (blas_threads() == 0) GTEST_SKIP() << "the BLAS in this process is not OpenBLAS (no openblas_get_num_threads)";
  set_torch_threads(3);
  ASSERT_EQ(blas_threads(), 3);
  Rig r;
  Offers offers;
  OnlineTrainOptions o = r.options(r.dir.file("online"));
  ASSERT_EQ(o.threads, 1);
  OnlineTrainer t(*r.bundle.model, r.dir.file("draft"), 0, o, offers.hooks());
  t.start();
  r.serve(&t, 24);
  ASSERT_TRUE(wait_for([&] { return t.stats().steps >= 1; }, 120)) << t.stats().steps << " steps";
  t.stop();
  EXPECT_EQ(blas_threads(), 1);
}

// A DFlash draft learns from the same captured traffic under its block loss (random anchors);
// the guard counts its greedy block acceptance on the held-back sequences, and every version is a
// DFlash export in the published layout that the engine loads and a restart resumes from.
TEST(OnlineTrainer, TrainsDFlashDraftsFromCapturedTraffic) {
  Rig r(3, DraftKind::DFlash);
  Offers offers;
  const std::vector<OnlineTrainer::Candidate>& offered = offers.all;
  const OnlineTrainer::Hooks hooks = offers.hooks();
  OnlineTrainOptions o = r.options(r.dir.file("online"));
  o.num_anchors = 8;
  OnlineTrainer t(*r.bundle.model, r.dir.file("draft"), 0, o, hooks);
  t.start();
  r.serve(&t, 64);
  ASSERT_TRUE(wait_for([&] { return t.stats().accepted >= 2; }, 120)) << t.stats().steps << " steps";
  t.stop();
  EXPECT_EQ(t.stats().serving_version, offered.back().version);
  for (auto& c : offered) {
    EXPECT_GE(c.candidate_score, c.serving_score);
    EXPECT_GE(c.serving_score, 1.0);  // tokens per block: the target's own plus those accepted
    const auto cfg = json::parse(read_text_file(c.dir + "/config.json"));
    EXPECT_EQ(cfg["architectures"][0], "DFlashDraftModel") << c.dir;
    EXPECT_EQ(cfg["block_size"], 8) << c.dir;
    EXPECT_NO_THROW(DFlashDraft::load(c.dir, *r.bundle.model)) << c.dir;
  }
  EXPECT_GT(offered.back().candidate_score, offered.front().serving_score);
  OnlineTrainer again(*r.bundle.model, offered.back().dir, offered.back().version, o, {});
  EXPECT_GT(again.stats().steps, 0);
}

// What the guard counts is what the engine accepts: on a sequence the engine served, the blocks it
// drafted (each anchored at a step's last verified token, capped as the engine caps them) accept
// through the training module, on the target's taps of that text, exactly the drafts the engine's
// verifier accepted. (The guard scores a block at every generated position, not only at these.)
TEST(OnlineTrainer, DFlashCountedAcceptanceIsTheEnginesOnServedText) {
  Rig r(3, DraftKind::DFlash);
  Model& target = *r.bundle.model;
  DFlashModule m = load_dflash_module(r.dir.file("draft"), target);
  const int k = 7, M = 40, B = m->opts.config.block_size;
  int64_t engine_drafts = 0, engine_accepted = 0, module_drafts = 0, module_accepted = 0;
  for (int i = 0; i < 6; ++i) {
    OfflineEngine e(test::pool(), target, r.bundle.tokenizer, r.spec.get(), 8 + M);
    auto req = std::make_shared<Request>();
    req->prompt = {1, 65 + i * 3, 97 + (i * 7) % 26, 32};
    req->sampling.temperature = 0;
    req->stop.max_tokens = M;
    req->stop.ignore_eos = true;
    const GenerationResult g = e.run(req);
    ASSERT_EQ(g.token_ids.size(), size_t(M));
    engine_drafts += e.core().spec_metrics().num_drafts;
    engine_accepted += e.core().spec_metrics().num_accepted_tokens;
    // The module on the target's taps of prompt + output.
    std::vector<int> seq = req->prompt;
    seq.insert(seq.end(), g.token_ids.begin(), g.token_ids.end());
    const int P = int(req->prompt.size()), T = int(seq.size());
    KvCache cache(target.kv_shape(kv_blocks_for(T)));
    std::vector<float> taps;
    prefill(test::pool(), target, cache, cache.create(), seq, 512, m->opts.config.taps, &taps);
    torch::NoGradGuard ng;
    const int64_t width = int64_t(taps.size()) / T;
    auto ctx = m->context(torch::from_blob(taps.data(), {1, T, width}, torch::kFloat32));
    for (int a = P, emitted = 1; emitted < M;) {  // a: the last verified token's position
      const int cap = std::min(k, M - emitted - 1);
      int n = 0;
      if (cap > 0) {
        auto logits = m->forward(ctx, torch::tensor({{int64_t(seq[size_t(a)])}}), torch::tensor({{int64_t(a)}}));
        auto best = logits.argmax(-1).view({B - 1});
        while (n < cap && best[n].item<int64_t>() == seq[size_t(a + n + 1)]) ++n;
        ++module_drafts;
        module_accepted += n;
      }
      a += n + 1;
      emitted += n + 1;
    }
  }
  EXPECT_GT(engine_accepted, 0);
  EXPECT_EQ(module_drafts, engine_drafts);
  EXPECT_EQ(module_accepted, engine_accepted);
}

// A candidate perturbed on purpose scores below the serving draft and is never offered. The
// serving draft is first trained to predict this target (over the full vocabulary, so that a
// broken draft cannot be right by chance the way one choosing among 3 tokens can).
TEST(OnlineTrainer, GuardTurnsDownPoisonedCandidates) {
  Rig r(/*draft_vocab=*/259);
  std::string trained;
  int version = 0;
  {
    OnlineTrainer::Hooks hooks;
    hooks.install = [&](const OnlineTrainer::Candidate& c) {
      trained = c.dir;
      version = c.version;
      return true;
    };
    OnlineTrainer t(*r.bundle.model, r.dir.file("draft"), 0, r.options(r.dir.file("warm")), hooks);
    t.start();
    r.serve(&t, 64);
    ASSERT_TRUE(wait_for([&] { return t.stats().accepted >= 3; }, 120));
    t.stop();
  }
  int installs = 0;
  OnlineTrainer::Hooks hooks;
  hooks.install = [&](const OnlineTrainer::Candidate&) { return ++installs > 0; };
  OnlineTrainOptions o = r.options(r.dir.file("online"));
  o.poison = 1.0;
  OnlineTrainer t(*r.bundle.model, trained, version, o, hooks);
  t.start();
  r.serve(&t, 48);
  ASSERT_TRUE(wait_for([&] { return t.stats().rejected >= 2; }, 120));
  t.stop();
  EXPECT_EQ(installs, 0);
  EXPECT_EQ(t.stats().accepted, 0);
  EXPECT_EQ(t.stats().serving_version, version);
  EXPECT_LT(t.stats().last_candidate_score, t.stats().last_serving_score);
}

// The module trains plain EAGLE-3 only; other flavours are refused by what they have.
TEST(OnlineTrainer, RefusesDraftFlavoursTheModuleDoesNotTrain) {
  Rig r;
  test::DraftSpec s;
  s.vocab = 259;
  s.norm_before_fc = true;
  test::write_draft(r.dir.file("normfc"), s);
  test::expect_mentions(test::error_of([&] { load_trainable_draft(r.dir.file("normfc"), *r.bundle.model); }),
                        {"normfc", "norm_before_fc"});
}

// An EAGLE-3.1 draft (the MiniMax-M3 draft's flavour: per-tap norms, normed state fed back) is
// one the module trains: loaded with its own fc_norm weights, it computes what the engine serves.
TEST(OnlineTrainer, TrainsEagle31Drafts) {
  Rig r;
  test::DraftSpec s;
  s.vocab = 259;
  s.fc_norm = true;
  s.norm_output = true;
  test::write_draft(r.dir.file("eagle31"), s);
  const auto draft = Eagle3Draft::load(r.dir.file("eagle31"), *r.bundle.model);
  ASSERT_TRUE(draft->config().fc_norm && draft->config().feeds_back_norm());
  expect_engine_matches_module(r.dir.file("eagle31"), *r.bundle.model, *draft);
}

// The whole loop in the real server, for an EAGLE-3 and a DFlash draft: requests are captured and
// trained on, versions swap in, every greedy output stays the target's own, the metrics say so,
// and the rollback endpoint is an admin one.
class OnlineServeLoop : public ::testing::TestWithParam<DraftKind> {};

TEST_P(OnlineServeLoop, TrainsSwapsAndRollsBackWhileServingExactly) {
  const bool dflash = GetParam() == DraftKind::DFlash;
  Rig r(3, GetParam());
  const std::string args = "-m " + r.dir.file("target") + " --draft " + r.dir.file("draft") +
                           (dflash ? " --spec-method dflash -k 7" : " -k 3") +
                           " --api-key k --online-train --online-train-dir " + r.dir.file("online") +
                           " --online-train-eval-every 5 --online-train-batch 4 --online-train-eval-samples 8"
                           " --online-train-cpu-share 1 --online-train-nice 0 --online-train-lr 0.003"
                           " --online-train-pause-above 1";  // the test keeps the engine busy: train anyway
  test::ServerProcess s(args);
  ASSERT_TRUE(s.ready());
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(std::chrono::seconds(60));
  const httplib::Headers auth = {{"Authorization", "Bearer k"}};
  auto g = std::make_shared<Request>();
  g->sampling.temperature = 0;
  g->stop.max_tokens = 32;
  g->stop.ignore_eos = true;
  std::string metrics;
  // Until a version has been swapped in (a loaded machine trains slower), within a deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
    const std::string prompt = std::string(1, char('A' + i % 26)) + "b" + std::string(1, char('c' + (i * 5) % 20));
    json body = {{"prompt", prompt}, {"max_tokens", 32}, {"temperature", 0}, {"ignore_eos", true}};
    auto res = c.Post("/v1/completions", auth, body.dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    if (i % 40 == 0) {  // the served text is plain greedy decoding's, whatever draft served it
      g->prompt = r.bundle.tokenizer.encode(prompt, true);
      const std::string want = generate(test::pool(), *r.bundle.model, r.bundle.tokenizer, g).text;
      EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], want) << i;
    }
    auto m = c.Get("/metrics", auth);
    ASSERT_TRUE(m);
    metrics = m->body;
    if (test::metric(metrics, "eaglet:draft_swaps_total") >= 1 && i >= 60) break;
  }
  EXPECT_GT(test::metric(metrics, "eaglet:online_train_steps_total"), 0);
  EXPECT_GT(test::metric(metrics, "eaglet:online_train_samples_total"), 0);
  ASSERT_GE(test::metric(metrics, "eaglet:draft_swaps_total"), 1) << metrics;
  const double version = test::metric(metrics, "eaglet:draft_version");
  EXPECT_GE(version, 1);
  EXPECT_NE(metrics.find("eaglet:spec_decode_acceptance_length{"), std::string::npos);
  EXPECT_GT(test::metric(metrics, "eaglet:online_train_seconds_total"), 0);
  // Rollback: the API key is required; then one version back.
  auto denied = c.Post("/v1/draft/rollback", "", "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  auto back = c.Post("/v1/draft/rollback", auth, "", "application/json");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, 200) << back->body;
  const json b = json::parse(back->body);
  EXPECT_EQ(b["rolled_back"], true);
  EXPECT_LT(b["version"].get<double>(), version);
  auto m = c.Get("/metrics", auth);
  EXPECT_EQ(test::metric(m->body, "eaglet:draft_version"), b["version"].get<double>());
  EXPECT_GE(test::metric(m->body, "eaglet:draft_rollbacks_total"), 1);
  // `loadtest --json` reports acceptance over time, each window split by the versions that served in it.
  test::TempDir d;
  const auto lt = test::run_command(test::eaglet_binary() + " loadtest --port " + std::to_string(s.port()) +
                                    " --api-key k --concurrency 2 --requests 8 --max-tokens 16 --metrics-every 4"
                                    " --json " + d.file("load.json") + " 2>&1");
  ASSERT_EQ(lt.exit_code, 0) << lt.output;
  EXPECT_NE(lt.output.find("acceptance length per 4 requests:"), std::string::npos) << lt.output;
  const json windows = json::parse(read_text_file(d.file("load.json")))[0]["acceptance_over_time"];
  ASSERT_EQ(windows.size(), 2u) << windows;
  for (const json& w : windows) {
    ASSERT_GT(w["drafts"].get<double>(), 0) << w;
    double drafts = 0;
    for (const auto& [v, x] : w["by_version"].items()) {
      drafts += x["drafts"].get<double>();
      EXPECT_GE(x["acceptance_length"].get<double>(), 1.0);
    }
    EXPECT_EQ(drafts, w["drafts"].get<double>()) << w;  // every draft counted under the version that drafted it
  }
  EXPECT_EQ(s.terminate(), 0);
  EXPECT_TRUE(std::filesystem::exists(r.dir.file("online") + "/checkpoint/state.json"));
}

INSTANTIATE_TEST_SUITE_P(Drafts, OnlineServeLoop, ::testing::Values(DraftKind::Eagle3, DraftKind::DFlash),
                         [](const auto& info) { return info.param == DraftKind::Eagle3 ? "Eagle3" : "DFlash"; });

// Without --api-key the admin endpoint is closed, and without --online-train there is nothing to roll back.
TEST(OnlineServe, RollbackNeedsAnApiKeyAndOnlineTraining) {
  Rig r;
  test::ServerProcess open("-m " + r.dir.file("target") + " --draft " + r.dir.file("draft"));
  ASSERT_TRUE(open.ready());
  httplib::Client c("127.0.0.1", open.port());
  auto res = c.Post("/v1/draft/rollback", "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(res->body.find("--api-key"), std::string::npos);
  test::ServerProcess keyed("-m " + r.dir.file("target") + " --draft " + r.dir.file("draft") + " --api-key k");
  ASSERT_TRUE(keyed.ready());
  httplib::Client k("127.0.0.1", keyed.port());
  auto none = k.Post("/v1/draft/rollback", {{"Authorization", "Bearer k"}}, "", "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  // --online-train needs a draft the trainer can train, named in the error.
  auto bad = test::run_command(test::eaglet_binary() + " serve -m " + r.dir.file("target") +
                               " --online-train --online-train-dir " + r.dir.file("o") + " 2>&1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--draft"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace eaglet
