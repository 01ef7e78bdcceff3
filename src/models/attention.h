// GQA attention over the paged KV cache, shared by every architecture and the EAGLE-3 draft.
// A token's RoPE position, its cache row and what it sees are separate: in a chain they coincide
// (row = pos, causal over rows [0, row]); a token-tree node sits at row prefix + node index,
// RoPE position prefix + depth, and sees the prefix plus its own ancestors (SpecInfer's tree mask).
#pragma once
#include <vector>

#include "cache/kv_cache.h"
#include "models/rope.h"

namespace eaglet {

class ThreadPool;

// Tree nodes per forward and sequence, bounded so a node's ancestors fit one 64-bit mask.
inline constexpr int kMaxTreeTokens = 64;

struct TokenSlot {
  SeqId seq;
  int64_t pos;  // RoPE position
  int64_t row;  // cache row of its K/V
  // -1: causal, sees rows [0, row]. Otherwise a tree node: sees rows [0, tree_base) and the rows
  // tree_base + j for every bit j of tree_mask (its ancestors and itself).
  int64_t tree_base = -1;
  uint64_t tree_mask = 0;
  // Rows below it are out of a sliding window: hidden whatever the causal or tree rule says.
  int64_t first_row = 0;
};

// A run of cache rows [begin, end) of one sequence that a query attends to.
struct PosSpan {
  int64_t begin, end;
};
// The rows `slot` sees, as ascending disjoint spans (at most kMaxTreeTokens + 1), none below
// first_row.
std::vector<PosSpan> visible_spans(const TokenSlot& slot);

struct AttentionShape {
  int num_heads, num_kv_heads, head_dim;
};

// Applies RoPE to q [T, nh*hd] and k [T, nkv*hd] in place at each token's position (either may
// be null: a DFlash draft's context has keys only).
void apply_rope(const Rope& rope, const std::vector<TokenSlot>& slots, const AttentionShape& s,
                float* q, float* k);
// Writes k/v rows [T, nkv*hd] into the cache at each token's slot (space must be reserved).
void store_kv(KvCache& cache, int layer, const std::vector<TokenSlot>& slots, const AttentionShape& s,
              const float* k, const float* v);

// One query head over the cached keys of `spans` (ascending, disjoint): out[hd] = softmax(q K^T /
// sqrt(hd)) V in F32. Dense and block-sparse attention both end here, so when a sparse selection
// covers every visible block the result is bitwise the dense one.
void attend_head(KvCache& cache, int layer, SeqId seq, int kv_head, int head_dim, const float* q,
                 const PosSpan* spans, size_t num_spans, float* out);

// out [T, nh*hd] = softmax(q K^T / sqrt(hd)) V per head over the rows each token sees; (token,
// head) pairs are split over `pool`'s threads.
void paged_attention(ThreadPool& pool, KvCache& cache, int layer, const std::vector<TokenSlot>& slots,
                     const AttentionShape& s, const float* q, float* out);

}  // namespace eaglet
