#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/generator.h"
#include "sampling/sampler.h"

namespace eaglet {

double PerplexityResult::perplexity() const { return scored > 0 ? std::exp(nll_sum / double(scored)) : 0; }

PerplexityResult perplexity(ThreadPool& pool, Model& model, const std::vector<int>& tokens, int context,
                            int max_windows) {
  EAGLET_CHECK(context >= 4 && context <= model.config().max_position,
               "perplexity: --context {} must be in [4, the model's context {}]", context, model.config().max_position);
  EAGLET_CHECK(int64_t(tokens.size()) >= context, "perplexity: the text has {} tokens, fewer than one window of {}",
               tokens.size(), context);
  const int V = model.config().vocab;
  for (int t : tokens) EAGLET_CHECK(t >= 0 && t < V, "perplexity: token id {} is outside the vocabulary [0, {})", t, V);
  PerplexityResult r;
  const double t0 = monotonic_seconds();
  const int first = context / 2;  // positions before it only provide context
  KvCache cache(model.kv_shape(kv_blocks_for(context)));
  for (size_t start = 0; start + size_t(context) <= tokens.size(); start += size_t(context)) {
    if (max_windows > 0 && r.windows == max_windows) break;
    const SeqId seq = cache.create();
    ForwardBatch batch;
    SeqChunk chunk{seq, std::vector<int>(tokens.begin() + long(start), tokens.begin() + long(start) + context), {}};
    for (int i = first - 1; i < context - 1; ++i) chunk.logit_rows.push_back(i);  // row i predicts token i + 1
    batch.chunks.push_back(std::move(chunk));
    ForwardOutput out;
    model.forward(pool, cache, batch, &out);
    for (int64_t j = 0; j < out.num_logit_rows; ++j) {
      const float* row = out.logits.data() + j * V;
      const int next = tokens[start + size_t(first + j)];
      r.nll_sum += log_partition(row, V) - double(row[next]);
    }
    r.scored += out.num_logit_rows;
    ++r.windows;
    cache.free(seq);
  }
  r.seconds = monotonic_seconds() - t0;
  return r;
}

}  // namespace eaglet
