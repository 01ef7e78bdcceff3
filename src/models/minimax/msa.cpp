#include "models/minimax/msa.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace eaglet {

namespace {
constexpr float kInitScore = 1e30f, kLocalScore = 1e29f;
}

std::vector<int> msa_select_blocks(std::vector<float> scores, const MsaConfig& cfg) {
  const int nb = int(scores.size());
  for (int b = 0; b < std::min(nb, cfg.init_blocks); ++b) scores[size_t(b)] = kInitScore;
  for (int b = std::max(0, nb - cfg.local_blocks); b < nb; ++b) scores[size_t(b)] = kLocalScore;
  const int keep = std::min(nb, cfg.topk_blocks);
  std::vector<int> ids(static_cast<size_t>(nb));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&](int a, int b) {
    return scores[size_t(a)] != scores[size_t(b)] ? scores[size_t(a)] > scores[size_t(b)] : a < b;
  });
  ids.resize(size_t(keep));
  std::sort(ids.begin(), ids.end());
  return ids;
}

void store_index_keys(KvCache& cache, int layer, const std::vector<TokenSlot>& slots, const float* index_k,
                      int index_dim) {
  for (size_t t = 0; t < slots.size(); ++t)
    std::memcpy(cache.aux(layer, slots[t].seq, slots[t].row), index_k + t * size_t(index_dim),
                size_t(index_dim) * sizeof(float));
}

void msa_attention(ThreadPool& pool, KvCache& cache, int layer, const std::vector<TokenSlot>& slots, const AttentionShape& s,
                   const MsaConfig& cfg, const float* q, const float* index_q, float* out,
                   std::vector<MsaSelection>* trace) {
  const int64_t T = int64_t(slots.size());
  for (const TokenSlot& slot : slots)  // block selection is defined over a causal prefix only
    EAGLET_CHECK(slot.tree_base < 0, "MiniMax sparse attention verifies chains, not token trees");
  const int G = cfg.index_heads, D = cfg.index_dim, bs = cfg.block_size;
  const int kv_bs = cache.shape().block_size;
  std::vector<std::vector<int>> selected(size_t(T * G));
  // Block scores: one pass over the prefix's index keys per (query token, index head).
  pool.parallel_for(T * G, [&](int64_t b, int64_t e, int) {
    std::vector<float> scores;
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / G;
      const int g = int(i % G);
      const TokenSlot& slot = slots[size_t(t)];
      const auto& table = cache.block_table(slot.seq);
      const float* iq = index_q + (t * G + g) * D;
      const int64_t nb = slot.row / bs + 1;
      scores.assign(size_t(nb), -INFINITY);
      for (int64_t j = 0; j <= slot.row; ++j) {
        const float* ik = cache.aux_block(layer, table[size_t(j / kv_bs)]) + (j % kv_bs) * D;
        float& best = scores[size_t(j / bs)];
        best = std::max(best, kernels::dot(iq, ik, D));
      }
      selected[size_t(i)] = msa_select_blocks(std::move(scores), cfg);
    }
  });
  const int group = s.num_heads / s.num_kv_heads;
  pool.parallel_for(T * s.num_heads, [&](int64_t b, int64_t e, int) {
    std::vector<PosSpan> spans;
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / s.num_heads;
      const int h = int(i % s.num_heads);
      const TokenSlot& slot = slots[size_t(t)];
      spans.clear();
      for (int blk : selected[size_t(t * G + h / group)]) {
        const int64_t begin = int64_t(blk) * bs, end = std::min<int64_t>(begin + bs, slot.row + 1);
        if (!spans.empty() && spans.back().end == begin) spans.back().end = end;
        else spans.push_back({begin, end});
      }
      attend_head(cache, layer, slot.seq, h / group, s.head_dim, q + (t * s.num_heads + h) * s.head_dim,
                  spans.data(), spans.size(), out + (t * s.num_heads + h) * s.head_dim);
    }
  });
  if (trace)
    for (int64_t t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g)
        trace->push_back({layer, slots[size_t(t)].seq, slots[size_t(t)].pos, g, selected[size_t(t * G + g)]});
}

}  // namespace eaglet
