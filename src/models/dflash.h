// DFlash block drafts (z-lab's `DFlashDraftModel`, arXiv 2602.06036; served by vLLM's
// qwen3_dflash.py and llama.cpp's dflash.cpp): a few Qwen3 decoder layers that draft a block of
// B tokens in one forward. The target's context enters as keys and values: the outputs of the
// target layers `target_layer_ids`, concatenated, become one vector per token through
// hidden_norm(fc(.)), which every layer projects with its own k_proj (k_norm, RoPE at the token's
// position) and v_proj into the draft's paged cache. The block [last token, MASK x (B - 1)],
// embedded by the target, attends to that context and to the whole block (not causally), and the
// target's lm_head on block rows 1..B-1 gives the drafts. The draft has no embedding or lm_head
// of its own.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/json_config.h"
#include "models/attention.h"
#include "models/layer_weights.h"
#include "models/rope.h"
#include "models/model.h"
#include "models/scratch.h"
#include "models/weights.h"

namespace eaglet {

struct DFlashConfig {
  int hidden = 0, target_hidden = 0, intermediate = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, num_layers = 0;
  int block_size = 16;     // B: one forward drafts B - 1 tokens
  int mask_token_id = -1;  // the target-vocabulary id the block's positions 1..B-1 hold
  float rms_eps = 1e-6f;
  bool attention_bias = false;
  // The target layers whose outputs are read, as the checkpoint numbers them (0-based, the output
  // of layer id = Hugging Face hidden_states[id + 1]); `taps`: the same in eaglet's numbering (the
  // residual stream entering layer id + 1), which the target's forward taps.
  std::vector<int> target_layer_ids, taps;
  // Per layer: a sliding window of `sliding_window` positions (a block query at position p sees
  // keys from p - W + 1), and causal (a block query sees the block's keys up to its own; else
  // all of them, or those within W - 1 positions in a sliding layer). Resolved as vLLM does.
  struct LayerAttention {
    bool sliding = false, causal = false;
  };
  std::vector<LayerAttention> layer_attention;
  int sliding_window = 0;
};

// Reads a DFlash config.json for a target of `target_layers` layers and hidden `target_hidden`:
// block_size at the top level or in dflash_config, dflash_config.{mask_token_id,
// target_layer_ids} (default: z-lab's spread over num_target_layers); sliding-window and causal
// layers as vLLM resolves them (layer_types / dflash_config.use_swa, swa_window_size or
// sliding_window; is_causal, then dflash_config.causal, else causal exactly where sliding). What
// eaglet does not run (attention sinks, scaled embeddings or logits) is an error naming the key.
DFlashConfig parse_dflash_config(const JsonConfig& cfg, int target_layers, int target_hidden);
// The config.json of `c` in z-lab's published layout (what parse_dflash_config, vLLM, SGLang and
// llama.cpp's converter read): Qwen3 layer fields, block_size at the top level and in
// dflash_config, mask_token_id and target_layer_ids there, num_target_layers.
nlohmann::json dflash_config_json(const DFlashConfig& c, const Rope& rope, int max_position, int target_layers,
                                  int vocab);

class DFlashDraft {
 public:
  // `path`: a Hugging Face directory (config.json with `DFlashDraftModel`, model.safetensors), or
  // a `.gguf` file of llama.cpp's architecture `dflash` (load_gguf). A tensor the draft does not
  // read is an error naming it.
  static std::unique_ptr<DFlashDraft> load(const std::string& path, const Model& target);
  // llama.cpp's converter's file (models/dflash_gguf.cpp): Qwen3 `dflash.*` metadata,
  // `dflash.target_layers` as layer inputs (the checkpoint's ids + 1), the mask token as
  // `tokenizer.ggml.mask_token_id`, hidden_norm as `enc.output_norm`, layers as `blk.N.*`.
  static std::unique_ptr<DFlashDraft> load_gguf(const std::string& path, const Model& target);

  const DFlashConfig& config() const { return cfg_; }
  // The layers' and fc's matrices re-stored as `scheme` (--draft-quantize), as Eagle3Draft's.
  void quantize_weights(kernels::QuantScheme scheme);
  // Every matrix a draft forward multiplies by (the target's lm_head included).
  std::vector<const kernels::WeightView*> matrices() const;
  KvCacheShape kv_shape(int64_t num_blocks, int block_size = 16) const;

  // `n` context tokens of `seq`: `features` [n, taps * target_hidden] are the target's taps of
  // the tokens at positions cache.length(seq) onwards.
  struct Context {
    SeqId seq;
    const float* features;
    int64_t n;
  };
  // Appends each sequence's new context, all sequences in one forward.
  void add_context(ThreadPool& pool, KvCache& cache, const std::vector<Context>& chunks) const;
  void add_context(ThreadPool& pool, KvCache& cache, SeqId seq, const float* features, int64_t n) const {
    add_context(pool, cache, {Context{seq, features, n}});
  }
  // The block after the context of `seq` (P = cache.length(seq) tokens): `last_token` at
  // position P, MASK at P+1..P+B-1.
  struct Block {
    SeqId seq;
    int last_token;
  };
  // Drafts every sequence's block in one forward (one read of the weights for all): `logits`
  // [blocks * (B - 1), vocab], block i's row k - 1 scoring its position P + k. The blocks' keys
  // and values are dropped again.
  void draft_blocks(ThreadPool& pool, KvCache& cache, const std::vector<Block>& blocks, std::vector<float>* logits) const;
  void draft_block(ThreadPool& pool, KvCache& cache, SeqId seq, int last_token, std::vector<float>* logits) const {
    draft_blocks(pool, cache, {Block{seq, last_token}}, logits);
  }

 private:
  // Where the weights come from: the top-level tensors' names and the layers' prefix and naming.
  struct TensorNames {
    std::string fc = "fc.weight", hidden_norm = "hidden_norm.weight", norm = "norm.weight", layers = "layers.";
    Naming naming = Naming::HuggingFace;
  };
  DFlashDraft(DFlashConfig cfg, Rope rope, const Model& target);
  // Reads every weight through `matrix` / `vector`; returns the names read, so that a loader can
  // refuse the tensors its file holds beyond them.
  std::set<std::string> read_weights(const TensorNames& names, const MatrixReader& matrix, const VectorReader& vector);
  struct Scratch {
    ScratchBuffer x, h, q, k, v, attn, tmp, gate, up, ctx, fused, normed, features;
    std::vector<TokenSlot> slots, seen;  // seen: the block slots as one layer's attention sees them
  };
  void layer_forward(ThreadPool& pool, KvCache& cache, int index, const std::vector<TokenSlot>& slots, float* x,
                     Scratch& act) const;
  // The block slots narrowed to what layer `index` attends to (its window, causal order); the
  // slots themselves for a full, non-causal layer.
  const std::vector<TokenSlot>& attention_slots(int index, const std::vector<TokenSlot>& slots, Scratch& act) const;
  // Per-head RMSNorm of k [T, nkv * hd], RoPE at `slots`, stored with v in the cache.
  void store_context(KvCache& cache, int index, const std::vector<TokenSlot>& slots, float* k, const float* v) const;

  DFlashConfig cfg_;
  Rope rope_;
  WeightStore weights_;
  const Model& target_;
  AttentionShape attn_;
  kernels::WeightView fc_;
  std::vector<float> hidden_norm_, norm_;
  std::vector<DecoderLayerWeights> layers_;
  mutable ScratchPool<Scratch> scratch_;
};

}  // namespace eaglet
