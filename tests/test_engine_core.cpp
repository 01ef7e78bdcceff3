// The engine core over many sequences at once, on the built-in model (no ../shared needed): a
// proposer that knows the target's greedy continuation hides it among decoy siblings, in tree
// shapes that differ per sequence, so accepted paths run through later siblings and deep nodes
// and their KV rows must be compacted into place. Every output must equal plain greedy decoding,
// alone or batched, with fixed shapes and with the cost model's auto policy.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/offline.h"
#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "speculation/cost_model.h"
#include "speculation/spec_setup.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

// Continuations of every prompt under plain greedy decoding, shared with the oracle.
std::map<std::vector<int>, std::vector<int>>& oracle_answers() {
  static std::map<std::vector<int>, std::vector<int>> m;
  return m;
}

class OracleProposer : public Proposer {
 public:
  std::string name() const override { return "oracle"; }
  bool drafts_trees() const override { return true; }
  bool scores_drafts() const override { return true; }
  void begin(SeqId seq, const std::vector<int>& prompt, const float*, int first) override {
    auto& s = seqs_[seq];
    s.answer = &oracle_answers().at(prompt);
    EXPECT_EQ(s.answer->at(0), first);
    s.done = 1;
  }
  void end(SeqId seq) override { seqs_.erase(seq); }
  void accept(const std::vector<Accepted>& acc) override {
    for (auto& a : acc) seqs_.at(a.seq).done += a.tokens.size();
  }
  // Per depth: `topk` siblings, the right token placed last but for every third sequence (which
  // gets the right token first), and one wrong token at depth 3 so that chains break there.
  void propose(const std::vector<Request>& reqs, std::vector<DraftTree>* trees) override {
    trees->assign(reqs.size(), DraftTree{});
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto& st = seqs_.at(reqs[i].seq);
      const TreeShape sh = reqs[i].shape;
      DraftTree& t = (*trees)[i];
      int parent = -1;
      float score = 1.0f;
      for (int d = 1; d <= sh.depth && t.size() < sh.budget; ++d) {
        const size_t at = st.done + size_t(d) - 1;
        if (at >= st.answer->size()) break;
        const int right = d == 3 && reqs[i].seq % 2 == 0 ? ((*st.answer)[at] + 1) % 259 : (*st.answer)[at];
        const bool right_first = reqs[i].seq % 3 == 0;
        int next_parent = -1;
        score *= 0.8f;
        for (int k = 0; k < sh.topk && t.size() < sh.budget; ++k) {
          const bool is_right = right_first ? k == 0 : k == sh.topk - 1;
          const int token = is_right ? right : (right + 7 + 13 * k) % 259;
          t.add(token, parent, score * (is_right ? 1.0f : 0.5f));
          if (is_right) next_parent = t.size() - 1;
        }
        if (next_parent < 0) break;
        parent = next_parent;
      }
      // Keep the "every prefix is a tree, scores descending" contract the policy relies on.
      std::vector<int> order(size_t(t.size()));
      for (int k = 0; k < t.size(); ++k) order[size_t(k)] = k;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return t.scores[size_t(a)] > t.scores[size_t(b)];
      });
      DraftTree sorted;
      std::vector<int> where(size_t(t.size()), -1);
      for (int k : order) {
        const int p = t.parents[size_t(k)];
        if (p >= 0 && where[size_t(p)] < 0) break;  // (cannot happen: parents score higher)
        where[size_t(k)] = sorted.size();
        sorted.add(t.tokens[size_t(k)], p < 0 ? -1 : where[size_t(p)], t.scores[size_t(k)]);
      }
      t = sorted;
    }
  }

 private:
  struct State {
    const std::vector<int>* answer = nullptr;
    size_t done = 0;  // tokens of the answer already final
  };
  std::map<SeqId, State> seqs_;
};

struct Fixture {
  ModelBundle b = load_bundle("");
  std::vector<std::vector<int>> prompts;
  std::vector<int> max_tokens;
  Fixture() {
    static bool registered = false;
    if (!registered) {
      SpecSetup::register_proposer("oracle", DraftKind::None, true,
                                   [](const SpecSetup&, int64_t, ThreadPool&) { return std::make_unique<OracleProposer>(); });
      registered = true;
    }
    for (int i = 0; i < 9; ++i) {
      prompts.push_back(b.tokenizer.encode("prompt " + std::to_string(i) + std::string(size_t(i), 'x')));
      max_tokens.push_back(20 + 5 * i);
      auto r = std::make_shared<Request>();
      r->prompt = prompts.back();
      r->stop.max_tokens = max_tokens.back();
      r->stop.ignore_eos = true;
      oracle_answers()[prompts.back()] = generate(test::pool(), *b.model, b.tokenizer, r).token_ids;
    }
  }
};

// Runs every prompt through one engine with up to `batch` sequences at a time.
std::vector<std::vector<int>> run_batched(Fixture& f, const SpecSetup& spec, int batch, SpecMetrics* m) {
  // Several steps of prefill (7 tokens a step), mixed with other sequences' verification.
  OfflineEngine engine(test::pool(), *f.b.model, f.b.tokenizer, &spec, 255, batch, /*prefill_chunk=*/7);
  std::vector<std::vector<int>> out(f.prompts.size());
  std::vector<bool> done(f.prompts.size(), false);
  std::vector<std::shared_ptr<Request>> requests;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    auto r = std::make_shared<Request>();
    r->prompt = f.prompts[i];
    r->stop.max_tokens = f.max_tokens[i];
    r->stop.ignore_eos = true;
    r->on_output = [&out, i](const std::string&, const std::vector<TokenLogprob>& t) {
      for (auto& x : t) out[i].push_back(x.token);
    };
    r->on_finish = [&done, i](const std::string&, int) { done[i] = true; };
    requests.push_back(std::move(r));
  }
  engine.run_all(requests);
  for (bool d : done) EXPECT_TRUE(d);
  *m = engine.core().spec_metrics();
  return out;
}

TEST(EngineCore, TreesOfDifferentShapesOverManySequencesEqualPlainGreedy) {
  Fixture f;
  // Auto runs on two fixed cost curves (measuring this tiny model would make the test depend on
  // the machine): a memory-bound target, where trees pay, and a compute-bound one, where the
  // policy must stop drafting.
  const auto flat = std::make_shared<const CostModel>(std::vector<std::pair<int, double>>{{1, 0.05}, {64, 0.06}});
  const auto linear = std::make_shared<const CostModel>(std::vector<std::pair<int, double>>{{1, 0.05}, {64, 3.2}});
  struct Case {
    std::string shape;
    std::shared_ptr<const CostModel> cost;
    double min_al, max_al;
  };
  for (const Case& c : {Case{"k=4", nullptr, 1.8, 9}, Case{"topk=3,depth=5,budget=12", nullptr, 1.8, 9},
                        Case{"topk=2,depth=8,budget=16", nullptr, 1.8, 9}, Case{"auto", flat, 1.8, 9},
                        Case{"auto", linear, 1.0, 1.0}}) {
    SpecOptions so;
    so.method = "oracle";
    so.cost_model_cache = "off";
    if (c.shape.rfind("k=", 0) == 0) so.num_speculative_tokens = std::stoi(c.shape.substr(2));
    else so.draft_shape = c.shape;
    SpecSetup spec(so, *f.b.model);
    if (c.cost) spec.set_cost_model(c.cost);
    for (int batch : {1, 4}) {
      SpecMetrics m;
      const auto out = run_batched(f, spec, batch, &m);
      for (size_t i = 0; i < f.prompts.size(); ++i)
        EXPECT_EQ(out[i], oracle_answers().at(f.prompts[i])) << spec.describe() << ", batch " << batch << ", prompt " << i;
      // Deep accepted paths through later siblings: compaction was exercised. A compute-bound
      // target decoding one sequence alone gets no drafts at all (batched with other sequences'
      // prefill chunks, a draft token adds little to a step that is long anyway, and pays).
      EXPECT_GE(m.mean_acceptance_length(), c.min_al) << spec.describe() << ", batch " << batch;
      if (batch == 1) {
        EXPECT_LE(m.mean_acceptance_length(), c.max_al) << spec.describe();
        if (c.max_al == 1.0) {
          EXPECT_EQ(m.num_drafts, 0);
        }
      }
    }
  }
}

TEST(EngineCore, KeepRowsMovesTheAcceptedPathIntoPlace) {
  KvCache cache(KvCacheShape{2, 1, 4, 4, 8, 2});
  const SeqId s = cache.create();
  ASSERT_TRUE(cache.reserve(s, 12));
  for (int l = 0; l < 2; ++l)
    for (int64_t p = 0; p < 12; ++p)
      for (int j = 0; j < 4; ++j) {
        cache.key(l, s, p)[j] = float(100 * l + 10 * p + j);
        cache.value(l, s, p)[j] = -float(100 * l + 10 * p + j);
        if (j < 2) cache.aux(l, s, p)[j] = float(1000 + p);
      }
  cache.commit(s, 12);
  cache.keep_rows(s, 3, {5, 9, 11});  // rows 5, 9, 11 become 3, 4, 5
  ASSERT_EQ(cache.length(s), 6);
  const int64_t want[6] = {0, 1, 2, 5, 9, 11};
  for (int l = 0; l < 2; ++l)
    for (int64_t p = 0; p < 6; ++p) {
      EXPECT_EQ(cache.key(l, s, p)[1], float(100 * l + 10 * want[p] + 1));
      EXPECT_EQ(cache.value(l, s, p)[3], -float(100 * l + 10 * want[p] + 3));
      EXPECT_EQ(cache.aux(l, s, p)[0], float(1000 + want[p]));
    }
  EXPECT_THROW(cache.keep_rows(s, 2, {1}), Error);  // a row below the kept prefix
}

// What the engine reports: the prompt tokens the target ran.
struct PrefillCounter : EngineObserver {
  int64_t prompt_tokens = 0;
  void request_finished(const std::string&, const RequestTimes&) override {}
  void tokens(int64_t prompt, int64_t) override { prompt_tokens += prompt; }
  void time_to_first_token(double) override {}
  void inter_token_latency(double) override {}
  void iteration(int64_t) override {}
  void spec_step(int, int, int) override {}
  void set_draft_version(int) override {}
};

// n = 4 choices of one prompt (the server's n): the prompt is prefilled once and forked (copy on
// write), and each choice samples exactly what it samples alone. A leader cancelled before its
// prefill hands the prompt to the next choice, which still prefills it once for the rest.
TEST(EngineCore, ChoicesOfOnePromptPrefillItOnce) {
  ModelBundle b = load_bundle("");
  const SpecSetup plain(SpecOptions{}, *b.model);
  const std::vector<int> prompt = b.tokenizer.encode("one prompt, four sampled choices, and a long enough tail");
  auto request = [&](uint64_t seed) {
    auto r = std::make_shared<Request>();
    r->prompt = prompt;
    r->sampling.temperature = 0.9f;
    r->sampling.seed = seed;
    r->stop.max_tokens = 12;
    r->stop.ignore_eos = true;
    return r;
  };
  std::vector<std::vector<int>> alone;
  for (uint64_t seed = 1; seed <= 4; ++seed) alone.push_back(generate(test::pool(), *b.model, b.tokenizer, request(seed)).token_ids);
  for (bool cancel_leader : {false, true}) {
    PrefillCounter counter;
    EngineOptions o;
    o.max_num_seqs = 4;
    o.max_model_len = 128;
    o.prefill_chunk = 5;  // several steps of prefill: followers wait through them
    EngineCore e(test::pool(), *b.model, b.tokenizer, plain, o, &counter);
    std::vector<std::vector<int>> out(4);
    std::vector<std::shared_ptr<Request>> requests;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      auto r = request(seed);
      r->on_output = [&out, seed](const std::string&, const std::vector<TokenLogprob>& t) {
        for (auto& x : t) out[seed - 1].push_back(x.token);
      };
      ASSERT_TRUE(e.try_add(r));
      requests.push_back(r);
    }
    if (cancel_leader) {
      e.step();  // the leader is part-way through the prompt
      requests[0]->cancelled = true;
    }
    while (e.has_work()) e.step();
    const int64_t leader_part = cancel_leader ? std::min<int64_t>(5, int64_t(prompt.size())) : 0;
    EXPECT_EQ(counter.prompt_tokens, int64_t(prompt.size()) + leader_part) << "cancel_leader " << cancel_leader;
    for (size_t i = cancel_leader ? 1 : 0; i < 4; ++i) EXPECT_EQ(out[i], alone[i]) << "choice " << i;
  }
}

}  // namespace
}  // namespace eaglet
