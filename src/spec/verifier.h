// Lossless verification of a chain of draft tokens against the target's logits for the k+1
// verified positions (vLLM rejection_sampler semantics, draft distribution one-hot):
// greedy accepts while draft == target argmax; sampling accepts d with probability p(d) and on
// rejection draws from normalize(max(p - q, 0)), i.e. p without d; all accepted -> bonus from p.
#pragma once
#include <vector>

#include "engine/sampler.h"

namespace eaglet {

struct Verdict {
  int accepted = 0;  // drafts kept
  int next = -1;     // the target's token after them (correction or bonus)
};

Verdict verify_drafts(const float* logits, int vocab, const std::vector<int>& drafts, Sampler& sampler);

}  // namespace eaglet
