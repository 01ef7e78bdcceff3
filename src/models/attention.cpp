#include "models/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace eaglet {

void apply_rope(const Rope& rope, const std::vector<TokenSlot>& slots, const AttentionShape& s,
                float* q, float* k) {
  const int half = rope.rot_dim / 2;
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  for (size_t t = 0; t < slots.size(); ++t) {
    rope.angles(slots[t].pos, cs.data(), sn.data());
    for (int h = 0; q && h < s.num_heads; ++h)
      kernels::rope_neox(q + (t * s.num_heads + size_t(h)) * size_t(s.head_dim), cs.data(), sn.data(), rope.rot_dim);
    for (int h = 0; k && h < s.num_kv_heads; ++h)
      kernels::rope_neox(k + (t * s.num_kv_heads + size_t(h)) * size_t(s.head_dim), cs.data(), sn.data(), rope.rot_dim);
  }
}

void store_kv(KvCache& cache, int layer, const std::vector<TokenSlot>& slots, const AttentionShape& s,
              const float* k, const float* v) {
  const size_t row = size_t(s.num_kv_heads) * size_t(s.head_dim);
  for (size_t t = 0; t < slots.size(); ++t) {
    std::memcpy(cache.key(layer, slots[t].seq, slots[t].row), k + t * row, row * sizeof(float));
    std::memcpy(cache.value(layer, slots[t].seq, slots[t].row), v + t * row, row * sizeof(float));
  }
}

std::vector<PosSpan> visible_spans(const TokenSlot& slot) {
  const int64_t first = slot.first_row;
  if (slot.tree_base < 0) return {{first, slot.row + 1}};
  std::vector<PosSpan> spans;
  if (slot.tree_base > first) spans.push_back({first, slot.tree_base});
  for (uint64_t m = slot.tree_mask; m;) {
    const int64_t j = __builtin_ctzll(m);
    const int64_t r = slot.tree_base + j;
    m &= m - 1;
    if (r < first) continue;
    if (!spans.empty() && spans.back().end == r) ++spans.back().end;
    else spans.push_back({r, r + 1});
  }
  return spans;
}

namespace {
// Calls fn(block, row_offset, index, count) for each run of positions that lie in one cache
// block, where their rows are contiguous (stride row_stride): `row_offset` is the first row's
// offset in the block, `index` the run's first position counted across all spans.
template <class Fn>
void for_each_block_run(const std::vector<int>& table, int block_size, int64_t row_stride, const PosSpan* spans,
                        size_t num_spans, Fn&& fn) {
  int64_t idx = 0;
  for (size_t i = 0; i < num_spans; ++i)
    for (int64_t p = spans[i].begin; p < spans[i].end;) {
      const int64_t block = p / block_size;
      const int64_t run = std::min(spans[i].end, (block + 1) * block_size) - p;
      fn(table[size_t(block)], (p % block_size) * row_stride, idx, run);
      p += run;
      idx += run;
    }
}
}  // namespace

void attend_head(KvCache& cache, int layer, SeqId seq, int kv_head, int head_dim, const float* q,
                 const PosSpan* spans, size_t num_spans, float* out) {
  thread_local std::vector<float> scores;
  const auto& table = cache.block_table(seq);
  const int bs = cache.shape().block_size;
  const int64_t row = cache.row_stride();
  const float scale = 1.0f / std::sqrt(float(head_dim));
  int64_t n = 0;
  for (size_t i = 0; i < num_spans; ++i) n += spans[i].end - spans[i].begin;
  scores.resize(size_t(n));
  for_each_block_run(table, bs, row, spans, num_spans, [&](int block, int64_t offset, int64_t idx, int64_t run) {
    const float* k = cache.key_block(layer, block) + offset + kv_head * head_dim;
    kernels::dot_rows(q, k, row, run, head_dim, scale, scores.data() + idx);
  });
  kernels::softmax(scores.data(), n);
  std::memset(out, 0, sizeof(float) * size_t(head_dim));
  for_each_block_run(table, bs, row, spans, num_spans, [&](int block, int64_t offset, int64_t idx, int64_t run) {
    const float* v = cache.value_block(layer, block) + offset + kv_head * head_dim;
    kernels::axpy_rows(scores.data() + idx, v, row, run, head_dim, out);
  });
}

void paged_attention(ThreadPool& pool, KvCache& cache, int layer, const std::vector<TokenSlot>& slots,
                     const AttentionShape& s, const float* q, float* out) {
  const int64_t T = int64_t(slots.size());
  const int group = s.num_heads / s.num_kv_heads;
  const int hd = s.head_dim;
  // Only tree tokens need span lists; a causal token sees one span (no allocation per token).
  std::vector<std::vector<PosSpan>> tree_spans(slots.size());
  for (size_t t = 0; t < slots.size(); ++t)
    if (slots[t].tree_base >= 0) tree_spans[t] = visible_spans(slots[t]);
  auto heads = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / s.num_heads;
      const int h = int(i % s.num_heads);
      const TokenSlot& slot = slots[size_t(t)];
      const PosSpan causal{slot.first_row, slot.row + 1};
      const auto& tree = tree_spans[size_t(t)];
      const bool is_tree = slot.tree_base >= 0;
      attend_head(cache, layer, slot.seq, h / group, hd, q + (t * s.num_heads + h) * hd,
                  is_tree ? tree.data() : &causal, is_tree ? tree.size() : 1, out + (t * s.num_heads + h) * hd);
    }
  };
  // Two multiply-adds per cached position and head dimension; small passes skip the fork-join.
  int64_t work = 0;
  for (const TokenSlot& slot : slots) work += 2 * (slot.row + 1) * s.num_heads * hd;
  if (work < kernels::kMinParallelMacs) return heads(0, T * s.num_heads, 0);
  pool.parallel_for(T * s.num_heads, heads);
}

}  // namespace eaglet
