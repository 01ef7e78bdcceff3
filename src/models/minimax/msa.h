// MiniMax Sparse Attention (MSA) with vLLM's semantics. Keys are grouped in blocks of 128
// tokens; for each query, index head g scores every visible block by the maximum over its
// (causally visible) keys of <index_q[g], index_k[j]>, forces the init and local blocks inside the
// top-k budget, and picks the best `topk_blocks` (ties by block id). The query heads of KV head g
// then attend exactly, over the selected blocks only.
//
// Index keys live in the KV cache's aux lane (KvCacheShape::aux_dim), so decode and k+1-token
// verification select blocks without recomputing the prefix, and forks/rollbacks carry them.
// With no more visible blocks than the budget every block is selected and the result is bitwise
// that of dense causal attention (both go through attend_head).
#pragma once
#include <vector>

#include "models/attention.h"
#include "models/minimax/minimax_config.h"

namespace eaglet {

// One selection, recorded for tests and debugging.
struct MsaSelection {
  int layer;
  SeqId seq;
  int64_t pos;
  int index_head;
  std::vector<int> blocks;  // ascending
};

// Picks the blocks for one query from the scores of its `scores.size()` visible blocks; returns
// block ids in ascending order.
std::vector<int> msa_select_blocks(std::vector<float> scores, const MsaConfig& cfg);

// Writes index keys [T, index_dim] to the cache's aux lane at each token's slot.
void store_index_keys(KvCache& cache, int layer, const std::vector<TokenSlot>& slots, const float* index_k,
                      int index_dim);

// out [T, nh*hd]; q [T, nh*hd]; index_q [T, index_heads*index_dim]. K/V and index keys of the
// batch's tokens must already be stored. Appends every selection to `trace` when given.
void msa_attention(ThreadPool& pool, KvCache& cache, int layer, const std::vector<TokenSlot>& slots, const AttentionShape& s,
                   const MsaConfig& cfg, const float* q, const float* index_q, float* out,
                   std::vector<MsaSelection>* trace);

}  // namespace eaglet
