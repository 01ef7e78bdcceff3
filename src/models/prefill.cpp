#include "models/prefill.h"

#include <algorithm>

#include "core/error.h"

namespace eaglet {

int64_t kv_blocks_for(int64_t tokens, int block_size) { return (tokens + block_size - 1) / block_size + 1; }

std::vector<float> prefill(ThreadPool& pool, Model& model, KvCache& cache, SeqId seq, const std::vector<int>& ids, int chunk,
                           const std::vector<int>& tap_layers, std::vector<float>* taps) {
  EAGLET_CHECK(!ids.empty(), "empty prompt");
  ForwardOutput out;
  for (size_t b = 0; b < ids.size(); b += size_t(chunk)) {
    const size_t e = std::min(ids.size(), b + size_t(chunk));
    ForwardBatch batch;
    SeqChunk c{seq, std::vector<int>(ids.begin() + long(b), ids.begin() + long(e)), {}};
    if (e == ids.size()) c.logit_rows = {int(e - b - 1)};
    batch.chunks.push_back(std::move(c));
    batch.tap_layers = tap_layers;
    model.forward(pool, cache, batch, &out);
    if (taps) taps->insert(taps->end(), out.taps.begin(), out.taps.end());
  }
  return out.logits;
}

}  // namespace eaglet
