// Speculative decoding is lossless: greedy output equals plain greedy output token for token
// (chains k = 1..7, token trees of several shapes and the cost model's auto shape; many prompts,
// several targets and proposers), and sampled output follows the target's distribution, for
// chains and trees (chi-square).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "models/eagle3.h"
#include "engine/engine_core.h"
#include "speculation/spec_setup.h"
#include "speculation/tree_verifier.h"
#include "support/greedy_check.h"
#include "support/synthetic_dflash.h"
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
  std::vector<std::vector<int>> prompts;
  const std::vector<std::string> starts = {"Once upon a time", "Lily and Tom", "The cat", "One day", "Sam saw a big"};
  for (int i = 0; i < 50; ++i) {
    auto ids = b.tokenizer.encode(starts[size_t(i) % starts.size()]);
    ids.push_back(300 + i);  // distinct prompts
    prompts.push_back(ids);
  }
  SpecOptions eagle;
  eagle.draft_dir = dir.path();
  // Every shape on 16 prompts, and chains, a deep tree and auto on all 50.
  expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, std::vector<std::vector<int>>(prompts.begin(), prompts.begin() + 16),
                      eagle, 40);
  expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, std::vector<std::vector<int>>(prompts.begin() + 16, prompts.end()),
                      eagle, 40, {"k=1", "k=3", "k=7", "topk=4,depth=6,budget=24", "auto"});
  SpecOptions ngram;
  ngram.method = "ngram";
  const int64_t ngram_accepted = expect_greedy_equal(
      *b.model, b.tokenizer, b.eos_ids, std::vector<std::vector<int>>(prompts.begin(), prompts.begin() + 10), ngram, 60,
      {"k=1", "k=3", "k=7", "auto"});
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
  Tokenizer tok = Tokenizer::bytes();
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 30; ++i) prompts.push_back({1, 3 + i % 50, 7 + (i * 13) % 50, 4 + i % 7});
  SpecOptions eagle;
  eagle.draft_dir = dir.file("draft");
  EXPECT_GT(expect_greedy_equal(*target, tok, {}, prompts, eagle, 24), 0);
  // A draft that always agrees with the target shows the accept path; the n-gram proposer on
  // repetitive random-model output does that often.
  SpecOptions ngram;
  ngram.method = "ngram";
  EXPECT_GT(expect_greedy_equal(*target, tok, {}, prompts, ngram, 40, {"k=3"}), 0);
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
    const DraftTree chain = DraftTree::chain({d});
    for (int i = 0; i < n; ++i) {
      std::vector<float> rows = logits;  // verification of one draft needs k+1 = 2 rows
      rows.insert(rows.end(), logits.begin(), logits.end());
      Verdict v = verify_tree(rows.data(), V, chain, s);
      ++counts[size_t(v.accepted() == 1 ? d : v.next)];
    }
    // df = 7: p(chi2 > 24.3) = 0.001
    EXPECT_LT(chi_square(counts, std::vector<double>(p.begin(), p.end()), n), 24.3) << "draft " << d;
  }
}

TEST(SpeculativeSampling, TreeVerifierEmitsTheTargetDistribution) {
  // Root children 1, 3 and 5; node 1 has children 2 and 4. The first emitted token must follow
  // the root's distribution and, when it is child c, the second one c's row (multi-draft
  // recursive rejection sampling over siblings), with top-k / top-p / min-p applied.
  const int V = 6;
  DraftTree tree;
  tree.add(1, -1);
  tree.add(3, -1);
  tree.add(5, -1);
  tree.add(2, 0);
  tree.add(4, 0);
  const std::vector<std::vector<float>> rows = {{0.3f, 1.2f, -0.4f, 0.9f, 0.1f, 0.6f},   // root
                                                {0.8f, -1.0f, 1.4f, 0.2f, 0.5f, -0.3f},  // node 1
                                                {-0.2f, 0.4f, 0.0f, 1.1f, -0.6f, 0.7f},  // node 3
                                                {1.0f, 0.0f, 0.3f, -0.5f, 0.2f, 0.9f},   // node 5
                                                {0.1f, 0.6f, -0.2f, 0.4f, 1.3f, 0.0f},   // node 2
                                                {0.5f, 0.5f, 0.5f, -1.0f, 0.0f, 1.0f}};  // node 4
  std::vector<float> flat;
  for (auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  struct Case {
    float temperature, top_p, min_p;
    int top_k;
  };
  for (const Case c : {Case{1.0f, 1.0f, 0.0f, 0}, Case{0.7f, 0.9f, 0.0f, 0}, Case{1.3f, 1.0f, 0.1f, 4}}) {
    SamplingParams sp;
    sp.temperature = c.temperature;
    sp.top_p = c.top_p;
    sp.min_p = c.min_p;
    sp.top_k = c.top_k;
    sp.seed = 42;
    std::vector<std::vector<float>> p(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) target_probs(rows[r].data(), V, sp, &p[r]);
    // Categories: t1 with no second token (t1 not a child), then (t1, t2) for t1 in {1, 3, 5}.
    const std::vector<int> child_row = {-1, 1, -1, 2, -1, 3};
    std::vector<double> expect(size_t(V + 3 * V), 0.0);
    for (int t1 = 0; t1 < V; ++t1) {
      if (child_row[size_t(t1)] < 0) {
        expect[size_t(t1)] = p[0][size_t(t1)];
        continue;
      }
      const int slot = t1 == 1 ? 0 : t1 == 3 ? 1 : 2;
      for (int t2 = 0; t2 < V; ++t2)
        expect[size_t(V + slot * V + t2)] = double(p[0][size_t(t1)]) * p[size_t(child_row[size_t(t1)])][size_t(t2)];
    }
    Sampler s(sp);
    const int n = 40000;
    std::vector<int> counts(expect.size());
    for (int i = 0; i < n; ++i) {
      const Verdict v = verify_tree(flat.data(), V, tree, s);
      std::vector<int> out;
      for (int node : v.path) out.push_back(tree.tokens[size_t(node)]);
      out.push_back(v.next);
      const int t1 = out[0];
      if (child_row[size_t(t1)] < 0) {
        ASSERT_EQ(out.size(), 1u) << "a token that is no draft ended the step";
        ++counts[size_t(t1)];
      } else {
        ASSERT_GE(out.size(), 2u) << "an accepted draft must be followed by the target's token";
        const int slot = t1 == 1 ? 0 : t1 == 3 ? 1 : 2;
        ++counts[size_t(V + slot * V + out[1])];
      }
    }
    // 24 categories (some with zero probability), df <= 23: p(chi2 > 49.7) = 0.001
    EXPECT_LT(chi_square(counts, expect, n), 49.7) << "temperature " << c.temperature << " top_p " << c.top_p
                                                   << " min_p " << c.min_p << " top_k " << c.top_k;
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
    auto l1 = prefill(test::pool(), *target, cache, s, prompt, 64);
    std::vector<float> p1, p2;
    target_probs(l1.data(), V, sp, &p1);
    for (int a = 0; a < V; ++a) {
      SeqId f = cache.fork(s);
      ForwardBatch b;
      b.chunks = {SeqChunk{f, {a}, {0}}};
      ForwardOutput out;
      target->forward(test::pool(), cache, b, &out);
      target_probs(out.logits.data(), V, sp, &p2);
      for (int c = 0; c < V; ++c) joint[size_t(a * V + c)] = double(p1[size_t(a)]) * p2[size_t(c)];
      cache.free(f);
    }
  }
  test::write_dflash_draft(dir.file("dflash"), test::dflash_draft_config(/*mask_token_id=*/5));
  for (const std::string shape : {"eagle3 k=3", "eagle3 topk=3,depth=3,budget=8", "eagle3 auto", "ngram k=3", "dflash k=3",
                                  "dflash k=7", "dflash topk=3,depth=3,budget=8"}) {
    SpecOptions so;
    if (shape.rfind("eagle3", 0) == 0) so.draft_dir = dir.file("draft");
    else so.method = shape.substr(0, shape.find(' '));
    if (so.method == "dflash") so.draft_dir = dir.file("dflash");
    const SpecSetup setup(test::with_shape(so, shape.substr(shape.find(' ') + 1)), *target);
    std::vector<int> counts(size_t(V * V));
    const int n = 4000;
    for (int i = 0; i < n; ++i) {
      auto req = std::make_shared<Request>();
      req->prompt = prompt;
      req->sampling = sp;
      req->sampling.seed = uint64_t(i) * 7919 + 13;
      req->stop.max_tokens = 4;
      auto r = generate(test::pool(), *target, tok, req, &setup);
      ASSERT_GE(r.token_ids.size(), 2u);
      ++counts[size_t(r.token_ids[0] * V + r.token_ids[1])];
    }
    // df = 35: p(chi2 > 66.6) = 0.001
    EXPECT_LT(chi_square(counts, joint, n), 66.6) << shape;
  }
}

}  // namespace
}  // namespace eaglet
