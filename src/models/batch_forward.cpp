#include "models/batch_forward.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace eaglet {

void reserve_batch(KvCache& cache, const ForwardBatch& batch, int max_position, std::vector<int>* tokens,
                   std::vector<TokenSlot>* slots_out) {
  std::vector<std::pair<SeqId, int64_t>> reserved;
  for (auto& c : batch.chunks) {
    if (c.parents.empty()) continue;
    EAGLET_CHECK(c.parents.size() == c.tokens.size(), "token tree: {} parents for {} tokens", c.parents.size(),
                 c.tokens.size());
    EAGLET_CHECK(c.tokens.size() <= size_t(kMaxTreeTokens), "token tree of {} tokens (at most {})", c.tokens.size(),
                 kMaxTreeTokens);
    for (size_t i = 0; i < c.parents.size(); ++i)
      EAGLET_CHECK(i == 0 ? c.parents[i] == -1 : c.parents[i] >= 0 && c.parents[i] < int(i),
                   "token tree: node {} has parent {} (the root's is -1, every other's an earlier node)", i, c.parents[i]);
  }
  for (auto& c : batch.chunks) {
    const int64_t len = cache.length(c.seq);
    // A tree's tokens take positions up to its depth, not its size.
    int64_t span = int64_t(c.tokens.size());
    if (!c.parents.empty()) {
      std::vector<int64_t> depth(c.parents.size(), 1);
      for (size_t i = 1; i < c.parents.size(); ++i) depth[i] = depth[size_t(c.parents[i])] + 1;
      span = *std::max_element(depth.begin(), depth.end());
    }
    if (len + span > max_position)
      fail("sequence of {} tokens exceeds the model's context length {}", len + span, max_position);
    if (!cache.reserve(c.seq, int64_t(c.tokens.size()))) {
      for (auto& [s, n] : reserved) cache.truncate(s, n);
      fail("KV cache is full ({} blocks)", cache.total_blocks());
    }
    reserved.emplace_back(c.seq, len);
  }
  std::vector<TokenSlot>& slots = *slots_out;
  slots.clear();
  tokens->clear();
  for (auto& c : batch.chunks) {
    const int64_t start = cache.length(c.seq);
    if (c.parents.empty()) {
      for (size_t i = 0; i < c.tokens.size(); ++i) slots.push_back({c.seq, start + int64_t(i), start + int64_t(i)});
    } else {
      const size_t base = slots.size();
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        const int p = c.parents[i];
        const TokenSlot* parent = p >= 0 ? &slots[base + size_t(p)] : nullptr;
        const int64_t pos = parent ? parent->pos + 1 : start;
        const uint64_t mask = (parent ? parent->tree_mask : 0) | (uint64_t(1) << i);
        slots.push_back({c.seq, pos, start + int64_t(i), start, mask});
      }
    }
    tokens->insert(tokens->end(), c.tokens.begin(), c.tokens.end());
  }
}

void run_forward(ThreadPool& pool, const Model& model, KvCache& cache, const ForwardBatch& batch,
                 const LayerFn& layer, ForwardScratch& scratch, ForwardOutput* out) {
  const ModelConfig& c = model.config();
  const int64_t H = c.hidden;
  reserve_batch(cache, batch, c.max_position, &scratch.tokens, &scratch.slots);
  const int64_t T = int64_t(scratch.tokens.size());
  float* x = scratch.residual.get(T * H);
  model.embed(scratch.tokens.data(), T, x);
  TapCollector taps(batch, c.num_layers, T, H, out);
  taps.take(0, x);
  for (int l = 0; l < c.num_layers; ++l) {
    layer(l, scratch.slots, x);
    taps.take(l + 1, x);
  }
  finish_forward(pool, cache, batch, x, H, c.vocab,
                 [&model](const float* in, int64_t rows, float* o) { model.final_norm(in, rows, o); }, model.lm_head(),
                 scratch.selected, out);
}

TapCollector::TapCollector(const ForwardBatch& batch, int num_layers, int64_t T, int64_t H, ForwardOutput* out)
    : ids_(batch.tap_layers), T_(T), H_(H), out_(out) {
  for (int id : ids_)
    EAGLET_CHECK(id >= 0 && id <= num_layers, "hidden-state tap {} is out of range [0, {}]", id, num_layers);
  out->num_tokens = T;
  out->taps.assign(ids_.empty() ? 0 : size_t(T) * ids_.size() * size_t(H), 0.0f);
}

void TapCollector::take(int layer_id, const float* x) {
  const size_t n = ids_.size();
  for (size_t j = 0; j < n; ++j) {
    if (ids_[j] != layer_id) continue;
    for (int64_t t = 0; t < T_; ++t)
      std::memcpy(&out_->taps[(size_t(t) * n + j) * size_t(H_)], x + t * H_, size_t(H_) * sizeof(float));
  }
}

void finish_forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, const float* x, int64_t H,
                    int vocab, const std::function<void(const float*, int64_t, float*)>& final_norm,
                    const kernels::WeightView& lm_head, ScratchBuffer& selected, ForwardOutput* out) {
  for (auto& c : batch.chunks) cache.commit(c.seq, int64_t(c.tokens.size()));
  std::vector<int64_t> rows;
  int64_t base = 0;
  for (auto& c : batch.chunks) {
    for (int r : c.logit_rows) {
      EAGLET_CHECK(r >= 0 && r < int(c.tokens.size()), "logit row {} outside a chunk of {} tokens", r, c.tokens.size());
      rows.push_back(base + r);
    }
    base += int64_t(c.tokens.size());
  }
  out->num_logit_rows = int64_t(rows.size());
  out->logits.resize(rows.size() * size_t(vocab));
  if (rows.empty()) return;
  float* sel = selected.get(int64_t(rows.size()) * H);
  for (size_t i = 0; i < rows.size(); ++i) std::memcpy(sel + int64_t(i) * H, x + rows[i] * H, size_t(H) * sizeof(float));
  final_norm(sel, int64_t(rows.size()), sel);
  kernels::matmul(pool, sel, int64_t(rows.size()), lm_head, out->logits.data());
  out->weight_bytes_read += lm_head.nbytes();
}

}  // namespace eaglet
