// The EAGLE-3 draft (`LlamaForCausalLMEagle3` and speculators' `Eagle3Speculator`): one Llama
// decoder layer over [input_layernorm(embed(token)), hidden_norm(g)] (width 2H), where g is
// fc(concat of three target hidden states) at the first step and the draft's own output after.
// Loads every key/config variant real checkpoints use (see ../shared/docs/eagle3-reference.md §3).
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/json_config.h"
#include "models/attention.h"
#include "models/eagle3_config.h"
#include "models/eagle3_schema.h"
#include "models/layer_weights.h"
#include "models/model.h"
#include "models/scratch.h"
#include "models/weights.h"

namespace eaglet {

struct Eagle3Rows {
  SeqId seq;
  std::vector<int> tokens;  // target-vocabulary ids; one draft position each, appended to seq
  // Tree drafting: RoPE position, tree base and ancestor mask of each token (rows follow the
  // cache length). Empty: a causal chain.
  std::vector<TokenSlot> slots = {};
};

// The draft's tensors by their checkpoint names (layer tensors under the config's key_prefix for
// layer 0, "layers.i." for later ones), wherever they are stored: a safetensors checkpoint, or a
// GGUF file whose names the loader translates.
struct Eagle3TensorSource {
  std::string where;
  std::function<bool(const std::string&)> has;
  MatrixReader matrix;
  VectorReader vector;
  std::function<std::vector<int64_t>(int64_t n)> d2t;  // offsets: target id - draft id
};

class Eagle3Draft {
 public:
  // `path`: a Hugging Face directory, or a `.gguf` file made by llama.cpp's converter (architecture
  // `eagle3`, aux ids in its "input of layer" numbering, so `opts.numbering` does not apply).
  // `target` supplies embed_tokens / lm_head when the draft has none, and its layer count for the
  // default aux ids. A checkpoint tensor the resolved flavour does not read is an error naming it,
  // unless `opts.allow_unused_tensors` (then a warning). Logs the resolved flavour in one line.
  static std::unique_ptr<Eagle3Draft> load(const std::string& path, const Model& target,
                                           const Eagle3LoadOptions& opts = {});
  static std::unique_ptr<Eagle3Draft> load_gguf(const std::string& path, const Model& target);
  // For tests and the trainer's export check: built from an already-parsed config and weights.
  Eagle3Draft(Eagle3Config cfg, Rope rope, WeightStore weights, const Model& target);

  const Eagle3Config& config() const { return cfg_; }
  KvCacheShape kv_shape(int64_t num_blocks, int block_size = 16) const;

  // g [n, H] = fc(aux [n, 3*Ht]) with the optional norms.
  void fuse_aux(ThreadPool& pool, const float* aux, int64_t n, float* g) const;
  // Runs the draft layer over all rows (each chunk appended to its sequence in `cache`), with
  // states g [rows, H]. Writes the next states [rows, H] to `next_g` and, for the last row of each
  // chunk, draft-vocabulary logits [chunks, Vd] to `logits`. `all_logits` instead gives every row.
  void forward(ThreadPool& pool, KvCache& cache, const std::vector<Eagle3Rows>& chunks, const float* g, float* next_g,
               std::vector<float>* logits, bool all_logits = false) const;
  // The draft's own matrices (its layers, fc, an lm_head of its own; not the target's) re-stored
  // as `scheme` (--draft-quantize): a draft level then streams fewer bytes. The target's outputs
  // do not change (verification decides); acceptance may.
  void quantize_weights(kernels::QuantScheme scheme);
  // Every matrix a draft forward multiplies by (lm_head perhaps the target's).
  std::vector<const kernels::WeightView*> matrices() const;
  int to_target_id(int draft_id) const { return draft_id + int(d2t_.empty() ? 0 : d2t_[size_t(draft_id)]); }
  size_t weight_bytes() const;

 private:
  struct Unloaded {};
  Eagle3Draft(Eagle3Config cfg, Rope rope, const Model& target, Unloaded);
  void load_weights(const Eagle3TensorSource& src);
  void load_layers(const Eagle3TensorSource& src, const eagle3::Dims& d);
  void load_vocab(const Eagle3TensorSource& src, const eagle3::Dims& d);

  Eagle3Config cfg_;
  Rope rope_;
  WeightStore weights_;
  const Model& target_;
  kernels::WeightView fc_, lm_head_, embed_;
  bool own_embed_ = false;
  // Layer 0 reads [input_layernorm(embedding), hidden_norm(g)] (2H wide); later layers are plain
  // decoder layers over the residual stream (H wide), as vLLM runs them.
  std::vector<DecoderLayerWeights> layers_;
  std::vector<float> hidden_norm_, norm_, input_norm_, fc_norms_[3];
  std::set<std::string> used_;  // checkpoint tensors load_weights read (strict loading)
  std::vector<int64_t> d2t_;
  AttentionShape attn_;
  struct Scratch {
    ScratchBuffer x, e, residual, q, k, v, attn, tmp, hn, gate, up, normed, sel;
    std::vector<TokenSlot> slots;
    std::vector<int> tokens;
  };
  mutable ScratchPool<Scratch> scratch_;
  // Layer `index` over T rows: out = residual + attention(x [T, in_width]), then out += mlp(out).
  // `residual` may be `out`.
  void layer_forward(ThreadPool& pool, KvCache& cache, int index, const std::vector<TokenSlot>& slots, const float* x,
                     int64_t in_width, const float* residual, float* out, Scratch& act) const;
};

}  // namespace eaglet
