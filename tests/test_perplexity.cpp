// Perplexity against a direct computation: every scored token's probability from its own forward
// over exactly the window prefix before it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "engine/generator.h"
#include "engine/perplexity.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

TEST(Perplexity, WindowsScoreTheirSecondHalvesExactly) {
  auto m = make_builtin_model();
  const int V = m->config().vocab, context = 8;
  std::vector<int> ids;
  for (int i = 0; i < 21; ++i) ids.push_back((i * 37 + 5) % V);  // two windows of 8; 5 tokens left over
  const PerplexityResult r = perplexity(test::pool(), *m, ids, context);
  EXPECT_EQ(r.windows, 2);
  EXPECT_EQ(r.scored, 8);  // tokens 4..7 of each window
  double nll = 0;
  for (int w = 0; w < 2; ++w)
    for (int i = context / 2; i < context; ++i) {
      KvCache cache(m->kv_shape(4));
      const std::vector<int> prefix(ids.begin() + w * context, ids.begin() + w * context + i);
      const auto logits = prefill(test::pool(), *m, cache, cache.create(), prefix, 512);
      double z = 0;
      for (float l : logits) z += std::exp(double(l));
      nll += std::log(z) - logits[size_t(ids[size_t(w * context + i)])];
    }
  EXPECT_NEAR(r.nll_sum, nll, 1e-3 * std::fabs(nll));
  EXPECT_NEAR(r.perplexity(), std::exp(nll / 8), 1e-3 * std::exp(nll / 8));
  EXPECT_EQ(perplexity(test::pool(), *m, ids, context, 1).windows, 1);
  test::expect_mentions(test::error_of([&] { perplexity(test::pool(), *m, {1, 2, 3}, context); }),
                        {"3 tokens", "window of 8"});
  test::expect_mentions(test::error_of([&] { perplexity(test::pool(), *m, ids, 2); }), {"--context 2"});
}

}  // namespace
}  // namespace eaglet
