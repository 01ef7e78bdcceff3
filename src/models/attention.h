// Causal GQA attention over the paged KV cache, shared by every architecture and the EAGLE-3
// draft. Each query row attends to positions [0, pos] of its own sequence.
#pragma once
#include <vector>

#include "cache/kv_cache.h"
#include "models/rope.h"

namespace eaglet {

struct TokenSlot {
  SeqId seq;
  int64_t pos;  // absolute position of this token in its sequence
};

struct AttentionShape {
  int num_heads, num_kv_heads, head_dim;
};

// Applies RoPE to q [T, nh*hd] and k [T, nkv*hd] in place at each token's position.
void apply_rope(const Rope& rope, const std::vector<TokenSlot>& slots, const AttentionShape& s,
                float* q, float* k);
// Writes k/v rows [T, nkv*hd] into the cache at each token's slot (space must be reserved).
void store_kv(KvCache& cache, int layer, const std::vector<TokenSlot>& slots, const AttentionShape& s,
              const float* k, const float* v);
// A run of positions [begin, end) of one sequence that a query attends to.
struct PosSpan {
  int64_t begin, end;
};

// One query head over the cached keys of `spans` (ascending, disjoint): out[hd] = softmax(q K^T /
// sqrt(hd)) V in F32. Dense and block-sparse attention both end here, so when a sparse selection
// covers every visible block the result is bitwise the dense one.
void attend_head(KvCache& cache, int layer, SeqId seq, int kv_head, int head_dim, const float* q,
                 const PosSpan* spans, size_t num_spans, float* out);

// out [T, nh*hd] = softmax(q K^T / sqrt(hd)) V per head, causal up to each token's position.
void paged_attention(KvCache& cache, int layer, const std::vector<TokenSlot>& slots,
                     const AttentionShape& s, const float* q, float* out);

}  // namespace eaglet
