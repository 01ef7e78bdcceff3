// Speculative decoding is lossless: greedy output equals plain greedy output token for token
// (k = 1..7, many prompts, several targets and proposers), and sampled output follows the
// target's distribution (chi-square).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "models/eagle3.h"
#include "spec/eagle3_proposer.h"
#include "spec/ngram_proposer.h"
#include "spec/speculative_generator.h"
#include "spec/verifier.h"
#include "support/greedy_check.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using test::expect_greedy_equal;

TEST(SpeculativeGreedy, Stories260KWithRandomDraftAndNgram) {
  EAGLET_REQUIRE_SHARED();
  ModelBundle b = load_bundle(test::shared_dir() + "/models/stories260K-hf");
  test::TempDir dir;
  test::DraftSpec ds;
  ds.hidden = ds.target_hidden = 64;
  ds.vocab = ds.draft_vocab = 512;
  ds.heads = 4, ds.kv_heads = 4, ds.head_dim = 16, ds.intermediate = 96;
  test::write_draft(dir.path(), ds);
  auto draft = Eagle3Draft::load(dir.path(), *b.model);
  std::vector<std::vector<int>> prompts;
  const std::vector<std::string> starts = {"Once upon a time", "Lily and Tom", "The cat", "One day", "Sam saw a big"};
  for (int i = 0; i < 50; ++i) {
    auto ids = b.tokenizer.encode(starts[size_t(i) % starts.size()]);
    ids.push_back(300 + i);  // distinct prompts
    prompts.push_back(ids);
  }
  expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts,
                      [&] { return std::make_unique<Eagle3Proposer>(*draft, 256); }, 40);
  const int64_t ngram_accepted = expect_greedy_equal(
      *b.model, b.tokenizer, b.eos_ids, std::vector<std::vector<int>>(prompts.begin(), prompts.begin() + 10),
      [] { return std::make_unique<NgramProposer>(); }, 60);
  EXPECT_GT(ngram_accepted, 0) << "the n-gram proposer never had a draft accepted";
}

class SpeculativeGreedyTiny : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeGreedyTiny, RandomTargetsAndDrafts) {
  test::TempDir dir;
  test::TinyModelSpec ts;
  ts.architecture = GetParam();
  ts.layers = 6;
  ts.vocab = 61;
  test::write_tiny_model(dir.file("target"), ts);
  test::DraftSpec ds;
  ds.vocab = 61;
  ds.draft_vocab = 30;  // pruned vocabulary: exercises d2t
  test::write_draft(dir.file("draft"), ds);
  auto target = load_model(dir.file("target"));
  auto draft = Eagle3Draft::load(dir.file("draft"), *target);
  Tokenizer tok = Tokenizer::bytes();
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 50; ++i) prompts.push_back({1, 3 + i % 50, 7 + (i * 13) % 50, 4 + i % 7});
  expect_greedy_equal(*target, tok, {}, prompts, [&] { return std::make_unique<Eagle3Proposer>(*draft, 128); }, 24);
  // A draft that always agrees with the target shows the accept path; the n-gram proposer on
  // repetitive random-model output does that often.
  EXPECT_GT(expect_greedy_equal(*target, tok, {}, prompts, [] { return std::make_unique<NgramProposer>(); }, 40, {3}), 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, SpeculativeGreedyTiny,
                         ::testing::Values("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"));

// Chi-square statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    if (e < 1e-9) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has zero probability but was produced";
      continue;
    }
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(SpeculativeSampling, VerifierEmitsTheTargetDistribution) {
  // One position, a fixed draft token: whatever the draft, the emitted token is distributed as p.
  const int V = 8;
  const std::vector<float> logits = {1.0f, 0.2f, 2.0f, -1.0f, 0.5f, 1.5f, 0.0f, -0.5f};
  SamplingParams sp;
  sp.temperature = 0.9f;
  std::vector<float> p;
  target_probs(logits.data(), V, sp, &p);
  for (int d : {2, 3}) {  // a likely and an unlikely draft
    sp.seed = uint64_t(100 + d);
    Sampler s(sp);
    std::vector<int> counts(V);
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      std::vector<float> rows = logits;  // verification of one draft needs k+1 = 2 rows
      rows.insert(rows.end(), logits.begin(), logits.end());
      Verdict v = verify_drafts(rows.data(), V, {d}, s);
      ++counts[size_t(v.accepted == 1 ? d : v.next)];
    }
    // df = 7: p(chi2 > 24.3) = 0.001
    EXPECT_LT(chi_square(counts, std::vector<double>(p.begin(), p.end()), n), 24.3) << "draft " << d;
  }
}

TEST(SpeculativeSampling, GeneratedTokensFollowTheTarget) {
  // Tiny vocabulary target; compare the joint distribution of the first two generated tokens
  // under speculative sampling with the exact one computed from the target's probabilities.
  test::TempDir dir;
  test::TinyModelSpec ts;
  ts.vocab = 6;
  ts.layers = 4;
  ts.seed = 3;
  test::write_tiny_model(dir.file("target"), ts);
  test::DraftSpec ds;
  ds.vocab = ds.draft_vocab = 6;
  test::write_draft(dir.file("draft"), ds);
  auto target = load_model(dir.file("target"));
  auto draft = Eagle3Draft::load(dir.file("draft"), *target);
  Tokenizer tok = Tokenizer::bytes();
  const std::vector<int> prompt = {1, 4, 2};
  SamplingParams sp;
  sp.temperature = 1.0f;
  const int V = 6;
  // Exact joint p(t1, t2).
  std::vector<double> joint(size_t(V * V));
  {
    KvCache cache(target->kv_shape(4));
    SeqId s = cache.create();
    auto l1 = prefill(*target, cache, s, prompt, 64);
    std::vector<float> p1, p2;
    target_probs(l1.data(), V, sp, &p1);
    for (int a = 0; a < V; ++a) {
      SeqId f = cache.fork(s);
      ForwardBatch b;
      b.chunks = {SeqChunk{f, {a}, {0}}};
      ForwardOutput out;
      target->forward(cache, b, &out);
      target_probs(out.logits.data(), V, sp, &p2);
      for (int c = 0; c < V; ++c) joint[size_t(a * V + c)] = double(p1[size_t(a)]) * p2[size_t(c)];
      cache.free(f);
    }
  }
  for (const char* method : {"eagle3", "ngram"}) {
    std::vector<int> counts(size_t(V * V));
    const int n = 6000;
    for (int i = 0; i < n; ++i) {
      GenerationRequest req;
      req.prompt_ids = prompt;
      req.sampling = sp;
      req.sampling.seed = uint64_t(i) * 7919 + 13;
      req.stop.max_tokens = 4;
      std::unique_ptr<Proposer> prop;
      if (std::string(method) == "eagle3") prop = std::make_unique<Eagle3Proposer>(*draft, 32);
      else prop = std::make_unique<NgramProposer>();
      auto r = generate_speculative(*target, tok, *prop, req, 3, nullptr);
      ASSERT_GE(r.token_ids.size(), 2u);
      ++counts[size_t(r.token_ids[0] * V + r.token_ids[1])];
    }
    // df = 35: p(chi2 > 66.6) = 0.001
    EXPECT_LT(chi_square(counts, joint, n), 66.6) << method;
  }
}

}  // namespace
}  // namespace eaglet
