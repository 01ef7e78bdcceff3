// Paged KV cache: fixed-size blocks from one pool, a block table per sequence, reference counts
// so forks share their prefix (copy-on-write on the first write into a shared block), and
// truncate() that rolls a sequence back in O(blocks freed): speculative decoding rolls back the
// rejected draft tokens after every verification.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace eaglet {

using SeqId = int64_t;

struct KvCacheShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;   // tokens per block
  int64_t num_blocks = 0;
  // Extra floats per token and layer that live and die with the token's K/V, e.g. the index keys
  // of MiniMax sparse attention (forks share them, truncate rolls them back).
  int aux_dim = 0;

  size_t bytes_per_block() const {
    return size_t(num_layers) * size_t(block_size) * (2 * size_t(num_kv_heads) * size_t(head_dim) + size_t(aux_dim)) *
           sizeof(float);
  }
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  int64_t free_blocks() const { return int64_t(free_.size()); }
  int64_t total_blocks() const { return shape_.num_blocks; }
  // Blocks a sequence of `tokens` tokens needs.
  int64_t blocks_for(int64_t tokens) const { return (tokens + shape_.block_size - 1) / shape_.block_size; }

  SeqId create();
  SeqId fork(SeqId parent);  // shares every block of `parent`
  void free(SeqId seq);
  bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }
  int64_t length(SeqId seq) const;
  void truncate(SeqId seq, int64_t n);  // keep the first n tokens
  // Keeps the first `start` tokens followed by the tokens at `rows` (ascending, each >= start):
  // after a token tree's verification the accepted path's rows move into place, no recompute.
  void keep_rows(SeqId seq, int64_t start, const std::vector<int64_t>& rows);

  // Makes room for `n` more tokens (allocating blocks, un-sharing the last one); returns false
  // and changes nothing when the pool has too few free blocks.
  bool reserve(SeqId seq, int64_t n);
  // After a forward wrote K/V for positions [length, length + n): they become part of the sequence.
  void commit(SeqId seq, int64_t n);

  // Per-token row of num_kv_heads * head_dim floats, for positions < length + reserved.
  float* key(int layer, SeqId seq, int64_t pos);
  float* value(int layer, SeqId seq, int64_t pos);
  // Precomputed pointer table for fast attention loops over one sequence.
  const std::vector<int32_t>& block_table(SeqId seq) const;
  float* key_block(int layer, int32_t block) { return k_[size_t(layer)].data() + size_t(block) * block_stride_; }
  float* value_block(int layer, int32_t block) { return v_[size_t(layer)].data() + size_t(block) * block_stride_; }
  int64_t row_stride() const { return int64_t(shape_.num_kv_heads) * shape_.head_dim; }
  // The aux_dim-float row of a token (see KvCacheShape::aux_dim).
  float* aux(int layer, SeqId seq, int64_t pos);
  float* aux_block(int layer, int32_t block) { return aux_[size_t(layer)].data() + size_t(block) * aux_stride_; }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int64_t length = 0;
  };
  Seq& get(SeqId seq);
  const Seq& get(SeqId seq) const;
  int32_t alloc_block();
  void release_block(int32_t b);
  void copy_block(int32_t from, int32_t to);

  KvCacheShape shape_;
  size_t block_stride_, aux_stride_;
  std::vector<std::vector<float>> k_, v_, aux_;  // [layer][block * block_size * kv_heads * head_dim]
  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_;
  std::unordered_map<SeqId, Seq> seqs_;
  SeqId next_id_ = 1;
};

}  // namespace eaglet
