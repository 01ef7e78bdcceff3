// The losslessness check of speculative decoding: every prompt decoded plainly and through the
// engine core with each draft shape must give the same tokens and finish reason.
#pragma once
#include <string>
#include <vector>

#include "models/model.h"
#include "sampling/sampler.h"
#include "speculation/spec_setup.h"
#include "tokenizer/tokenizer.h"

namespace eaglet::test {

// Chains k = 1..7, fixed trees of several shapes and the cost model's auto shape.
std::vector<std::string> all_draft_shapes();

// `spec` names the proposer (method, draft); each entry of `shapes` is "k=N" (a chain) or a
// --draft-shape value. `sampling`: greedy, with a grammar perhaps. Returns the total number of
// accepted draft tokens (so callers can check speculation happened).
int64_t expect_greedy_equal(Model& target, const Tokenizer& tok, const std::vector<int>& eos,
                            const std::vector<std::vector<int>>& prompts, const SpecOptions& spec, int max_tokens,
                            const std::vector<std::string>& shapes = all_draft_shapes(),
                            const SamplingParams& sampling = {});

// SpecOptions for `shape` ("k=N" or a --draft-shape value) on top of `base`.
SpecOptions with_shape(SpecOptions base, const std::string& shape);

}  // namespace eaglet::test
