// Speculative generation for one sequence: the proposer drafts up to k tokens, the target
// verifies all k+1 positions in one forward, the verifier keeps a prefix and the target's next
// token, and both KV caches roll back what was rejected. With k = 0 it is plain decoding.
#pragma once
#include "engine/generator.h"
#include "spec/metrics.h"
#include "spec/proposer.h"

namespace eaglet {

GenerationResult generate_speculative(Model& target, const Tokenizer& tok, Proposer& proposer,
                                      const GenerationRequest& req, int k, SpecMetrics* metrics);

}  // namespace eaglet
