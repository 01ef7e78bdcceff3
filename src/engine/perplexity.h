// Perplexity of a token sequence under a model, the way llama.cpp's `llama-perplexity` scores
// it: the text is cut into windows of `context` tokens, each window runs from an empty cache, and
// only the second half of each window is scored (every scored token sees at least context/2
// tokens before it). Used to report what quantisation costs (`eaglet perplexity`).
#pragma once
#include <vector>

#include "models/model.h"

namespace eaglet {

struct PerplexityResult {
  double nll_sum = 0;   // natural-log negative log-likelihood over the scored tokens
  int64_t scored = 0, windows = 0;
  double seconds = 0;
  double perplexity() const;
};

// `max_windows` > 0 stops after that many windows. Throws when the text is shorter than one
// window.
PerplexityResult perplexity(ThreadPool& pool, Model& model, const std::vector<int>& tokens, int context,
                            int max_windows = 0);

}  // namespace eaglet
