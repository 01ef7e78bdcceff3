#include "cache/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace eaglet {

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  EAGLET_CHECK(shape.num_blocks > 0 && shape.block_size > 0, "KV cache: needs at least one block");
  block_stride_ = size_t(shape.block_size) * size_t(shape.num_kv_heads) * size_t(shape.head_dim);
  aux_stride_ = size_t(shape.block_size) * size_t(shape.aux_dim);
  k_.resize(size_t(shape.num_layers));
  v_.resize(size_t(shape.num_layers));
  aux_.resize(size_t(shape.num_layers));
  for (int l = 0; l < shape.num_layers; ++l) {
    k_[size_t(l)].resize(block_stride_ * size_t(shape.num_blocks));
    v_[size_t(l)].resize(block_stride_ * size_t(shape.num_blocks));
    aux_[size_t(l)].resize(aux_stride_ * size_t(shape.num_blocks));
  }
  refcount_.assign(size_t(shape.num_blocks), 0);
  free_.reserve(size_t(shape.num_blocks));
  for (int64_t b = shape.num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

KvCache::Seq& KvCache::get(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) fail("KV cache: unknown sequence {}", seq);
  return it->second;
}

const KvCache::Seq& KvCache::get(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) fail("KV cache: unknown sequence {}", seq);
  return it->second;
}

int32_t KvCache::alloc_block() {
  const int32_t b = free_.back();
  free_.pop_back();
  refcount_[size_t(b)] = 1;
  return b;
}

void KvCache::release_block(int32_t b) {
  if (--refcount_[size_t(b)] == 0) free_.push_back(b);
}

void KvCache::copy_block(int32_t from, int32_t to) {
  for (int l = 0; l < shape_.num_layers; ++l) {
    std::memcpy(key_block(l, to), key_block(l, from), block_stride_ * sizeof(float));
    std::memcpy(value_block(l, to), value_block(l, from), block_stride_ * sizeof(float));
    if (aux_stride_) std::memcpy(aux_block(l, to), aux_block(l, from), aux_stride_ * sizeof(float));
  }
}

SeqId KvCache::create() {
  const SeqId id = next_id_++;
  seqs_[id] = Seq{};
  return id;
}

SeqId KvCache::fork(SeqId parent) {
  Seq copy = get(parent);
  for (int32_t b : copy.blocks) ++refcount_[size_t(b)];
  const SeqId id = next_id_++;
  seqs_[id] = std::move(copy);
  return id;
}

void KvCache::free(SeqId seq) {
  Seq& s = get(seq);
  for (int32_t b : s.blocks) release_block(b);
  seqs_.erase(seq);
}

int64_t KvCache::length(SeqId seq) const { return get(seq).length; }

void KvCache::truncate(SeqId seq, int64_t n) {
  Seq& s = get(seq);
  EAGLET_CHECK(n >= 0 && n <= s.length, "KV cache: cannot truncate sequence {} of length {} to {}",
               seq, s.length, n);
  s.length = n;
  const size_t keep = size_t(blocks_for(n));
  while (s.blocks.size() > keep) {
    release_block(s.blocks.back());
    s.blocks.pop_back();
  }
}

void KvCache::keep_rows(SeqId seq, int64_t start, const std::vector<int64_t>& rows) {
  Seq& s = get(seq);
  const int bs = shape_.block_size;
  const size_t row = size_t(row_stride()), aux_row = size_t(shape_.aux_dim);
  for (size_t j = 0; j < rows.size(); ++j) {
    const int64_t from = rows[j], to = start + int64_t(j);
    EAGLET_CHECK(from >= to && from < s.length && (j == 0 || from > rows[j - 1]),
                 "KV cache: keep_rows row {} is not an ascending row >= {} below length {}", from, to, s.length);
    if (from == to) continue;
    const int32_t fb = s.blocks[size_t(from / bs)], tb = s.blocks[size_t(to / bs)];
    EAGLET_CHECK(refcount_[size_t(tb)] == 1, "KV cache: keep_rows into a block shared with another sequence");
    const size_t fo = size_t(from % bs), to_off = size_t(to % bs);
    for (int l = 0; l < shape_.num_layers; ++l) {
      std::memcpy(key_block(l, tb) + to_off * row, key_block(l, fb) + fo * row, row * sizeof(float));
      std::memcpy(value_block(l, tb) + to_off * row, value_block(l, fb) + fo * row, row * sizeof(float));
      if (aux_row)
        std::memcpy(aux_block(l, tb) + to_off * aux_row, aux_block(l, fb) + fo * aux_row, aux_row * sizeof(float));
    }
  }
  truncate(seq, start + int64_t(rows.size()));
}

bool KvCache::reserve(SeqId seq, int64_t n) {
  Seq& s = get(seq);
  if (n <= 0) return true;
  const size_t first = size_t(s.length / shape_.block_size);  // first block the writes touch
  const size_t need = size_t(blocks_for(s.length + n));
  size_t shared = 0;
  for (size_t i = first; i < std::min(need, s.blocks.size()); ++i) shared += refcount_[size_t(s.blocks[i])] > 1;
  const size_t fresh = (need > s.blocks.size() ? need - s.blocks.size() : 0) + shared;
  if (fresh > free_.size()) return false;
  // Blocks that another sequence still reads get copied before this one writes into them.
  for (size_t i = first; i < std::min(need, s.blocks.size()); ++i) {
    int32_t& b = s.blocks[i];
    if (refcount_[size_t(b)] <= 1) continue;
    const int32_t copy = alloc_block();
    copy_block(b, copy);
    release_block(b);
    b = copy;
  }
  while (s.blocks.size() < need) s.blocks.push_back(alloc_block());
  return true;
}

void KvCache::commit(SeqId seq, int64_t n) {
  Seq& s = get(seq);
  EAGLET_CHECK(blocks_for(s.length + n) <= int64_t(s.blocks.size()),
               "KV cache: commit of {} tokens past the reserved blocks of sequence {}", n, seq);
  s.length += n;
}

float* KvCache::key(int layer, SeqId seq, int64_t pos) {
  const Seq& s = get(seq);
  return key_block(layer, s.blocks[size_t(pos / shape_.block_size)]) + size_t(pos % shape_.block_size) * size_t(row_stride());
}

float* KvCache::value(int layer, SeqId seq, int64_t pos) {
  const Seq& s = get(seq);
  return value_block(layer, s.blocks[size_t(pos / shape_.block_size)]) + size_t(pos % shape_.block_size) * size_t(row_stride());
}

float* KvCache::aux(int layer, SeqId seq, int64_t pos) {
  const Seq& s = get(seq);
  return aux_block(layer, s.blocks[size_t(pos / shape_.block_size)]) + size_t(pos % shape_.block_size) * size_t(shape_.aux_dim);
}

const std::vector<int32_t>& KvCache::block_table(SeqId seq) const { return get(seq).blocks; }

}  // namespace eaglet
