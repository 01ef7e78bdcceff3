// What a forward's result may not depend on: the pool it runs on (threads are passed explicitly,
// see core/thread_pool.h), what earlier forwards left in the model's reused activation buffers
// (models/scratch.h), and another forward of the same model running at the same time (the
// trainer's inference workers share one target). Built-in model only: no ../shared needed.
#include <gtest/gtest.h>

#include <thread>

#include "core/thread_pool.h"
#include "models/model.h"

namespace eaglet {
namespace {

std::vector<int> tokens(int n, int seed, int vocab) {
  std::vector<int> t;
  for (int i = 0; i < n; ++i) t.push_back(int((i * 7919 + seed * 104729 + 3) % vocab));
  return t;
}

// Prefill then three single-token steps; returns every logit row and the taps of the prefill.
std::vector<float> run(Model& m, ThreadPool& pool, const std::vector<int>& prompt) {
  KvCache cache(m.kv_shape(16));
  const SeqId s = cache.create();
  ForwardBatch b;
  b.chunks.push_back({s, prompt, {int(prompt.size()) - 1}});
  b.tap_layers = {0, 1, m.config().num_layers};
  ForwardOutput out;
  m.forward(pool, cache, b, &out);
  std::vector<float> all = out.logits;
  all.insert(all.end(), out.taps.begin(), out.taps.end());
  for (int step = 0; step < 3; ++step) {
    ForwardBatch d;
    d.chunks.push_back({s, {prompt[size_t(step)]}, {0}});
    m.forward(pool, cache, d, &out);
    all.insert(all.end(), out.logits.begin(), out.logits.end());
  }
  return all;
}

TEST(ForwardContext, SameResultOnAnyPoolAndAfterLargerForwards) {
  auto fresh = make_builtin_model();
  auto used = make_builtin_model();
  const int V = fresh->config().vocab;
  ThreadPool one(1), three(3);
  const auto prompt = tokens(9, 1, V);
  const auto want = run(*fresh, one, prompt);
  // A larger forward first leaves its values in every scratch buffer of `used`.
  run(*used, three, tokens(120, 2, V));
  EXPECT_EQ(run(*used, three, prompt), want);
  EXPECT_EQ(run(*used, one, prompt), want);
}

TEST(ForwardContext, ConcurrentForwardsOfOneModelDoNotShareScratch) {
  auto model = make_builtin_model();
  const int V = model->config().vocab;
  ThreadPool solo(1);
  std::vector<std::vector<int>> prompts;
  std::vector<std::vector<float>> want;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(tokens(5 + 13 * i, 10 + i, V));  // different sizes: buffers grow under each other
    want.push_back(run(*model, solo, prompts.back()));
  }
  std::vector<std::vector<float>> got(prompts.size());
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w)
    workers.emplace_back([&, w] {
      ThreadPool pool(2);
      for (int rep = 0; rep < 4; ++rep)
        for (size_t i = size_t(w); i < prompts.size(); i += 2) got[i] = run(*model, pool, prompts[i]);
    });
  for (auto& t : workers) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << "prompt " << i;
}

}  // namespace
}  // namespace eaglet
