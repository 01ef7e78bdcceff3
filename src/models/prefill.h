// One sequence's prompt through a model outside the engine core (the cost model's timings, the
// tools' one-off runs), and the cache size such a run needs.
#pragma once
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace eaglet {

class ThreadPool;

// Blocks in a cache sized for one sequence of `tokens` tokens.
int64_t kv_blocks_for(int64_t tokens, int block_size = 16);

// Runs the prompt through the model in chunks; returns the last position's logits [vocab].
// `tap_layers`/`taps` (optional) collect hidden-state taps for every prompt token.
std::vector<float> prefill(ThreadPool& pool, Model& model, KvCache& cache, SeqId seq, const std::vector<int>& ids, int chunk,
                           const std::vector<int>& tap_layers = {}, std::vector<float>* taps = nullptr);

}  // namespace eaglet
