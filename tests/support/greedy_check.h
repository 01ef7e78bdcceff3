// The losslessness check of speculative decoding: every prompt decoded plainly and with a fresh
// proposer at each k must give the same tokens and finish reason.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "models/model.h"
#include "spec/proposer.h"
#include "tokenizer/tokenizer.h"

namespace eaglet::test {

// Returns the total number of accepted draft tokens (so callers can check speculation happened).
int64_t expect_greedy_equal(Model& target, const Tokenizer& tok, const std::vector<int>& eos,
                            const std::vector<std::vector<int>>& prompts,
                            const std::function<std::unique_ptr<Proposer>()>& make, int max_tokens,
                            std::vector<int> ks = {1, 2, 3, 4, 5, 6, 7});

}  // namespace eaglet::test
