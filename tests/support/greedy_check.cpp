#include "support/greedy_check.h"

#include <gtest/gtest.h>

#include "engine/generator.h"
#include "support/test_util.h"
#include "speculation/metrics.h"

namespace eaglet::test {

std::vector<std::string> all_draft_shapes() {
  return {"k=1", "k=2", "k=3", "k=4", "k=5", "k=6", "k=7", "topk=2,depth=3,budget=5", "topk=3,depth=4,budget=10",
          "topk=4,depth=6,budget=24", "topk=8,depth=2,budget=8", "auto"};
}

SpecOptions with_shape(SpecOptions base, const std::string& shape) {
  base.cost_model_cache = "off";  // tests never write into the user's cache
  if (shape.rfind("k=", 0) == 0) {
    base.num_speculative_tokens = std::stoi(shape.substr(2));
    base.draft_shape = "";
  } else {
    base.draft_shape = shape;
  }
  return base;
}

int64_t expect_greedy_equal(Model& target, const Tokenizer& tok, const std::vector<int>& eos,
                            const std::vector<std::vector<int>>& prompts, const SpecOptions& spec, int max_tokens,
                            const std::vector<std::string>& shapes, const SamplingParams& sampling) {
  std::vector<GenerationResult> plain;
  for (auto& p : prompts) {
    auto r = std::make_shared<Request>();
    r->prompt = p;
    r->sampling = sampling;
    r->stop.max_tokens = max_tokens;
    r->stop.stop_tokens = eos;
    plain.push_back(generate(test::pool(), target, tok, r));
  }
  int64_t accepted = 0;
  for (const std::string& shape : shapes) {
    const SpecSetup setup(with_shape(spec, shape), target);
    SpecMetrics m;
    for (size_t p = 0; p < prompts.size(); ++p) {
      auto r = std::make_shared<Request>();
      r->prompt = prompts[p];
      r->sampling = sampling;
      r->stop.max_tokens = max_tokens;
      r->stop.stop_tokens = eos;
      const auto out = generate(test::pool(), target, tok, r, &setup, &m);
      EXPECT_EQ(out.token_ids, plain[p].token_ids) << setup.describe() << ", prompt " << p;
      EXPECT_EQ(out.finish_reason, plain[p].finish_reason) << setup.describe() << ", prompt " << p;
    }
    accepted += m.num_accepted_tokens;
  }
  return accepted;
}

}  // namespace eaglet::test
