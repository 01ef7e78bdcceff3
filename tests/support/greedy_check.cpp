#include "support/greedy_check.h"

#include <gtest/gtest.h>

#include "engine/generator.h"
#include "spec/speculative_generator.h"

namespace eaglet::test {

namespace {
GenerationRequest greedy_request(std::vector<int> prompt, int max_tokens, const std::vector<int>& eos) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.stop.max_tokens = max_tokens;
  r.stop.stop_tokens = eos;
  return r;
}

}  // namespace

int64_t expect_greedy_equal(Model& target, const Tokenizer& tok, const std::vector<int>& eos,
                            const std::vector<std::vector<int>>& prompts, const std::function<std::unique_ptr<Proposer>()>& make,
                            int max_tokens, std::vector<int> ks) {
  int64_t accepted = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto req = greedy_request(prompts[p], max_tokens, eos);
    const auto plain = generate(target, tok, req);
    for (int k : ks) {
      auto proposer = make();
      SpecMetrics m;
      const auto spec = generate_speculative(target, tok, *proposer, req, k, &m);
      EXPECT_EQ(spec.token_ids, plain.token_ids) << proposer->name() << " prompt " << p << " k=" << k;
      EXPECT_EQ(spec.finish_reason, plain.finish_reason);
      accepted += m.num_accepted_tokens;
    }
  }
  return accepted;
}

}  // namespace eaglet::test
