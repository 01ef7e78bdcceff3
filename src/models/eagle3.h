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
#include "models/model.h"
#include "models/scratch.h"
#include "models/weights.h"

namespace eaglet {

// How aux-layer ids in a draft config are numbered.
enum class AuxNumbering {
  Input,   // vLLM / EAGLE / speculators / llama.cpp: id j = residual stream entering layer j
  Output,  // SGLang / SpecForge / TorchSpec: id i = output of layer i (= our i + 1)
  // As the servers decide: top-level ids as vLLM reads them (Input); ids found only under
  // eagle_config as SGLang reads them since PR #25454 (Output when the first id is 1, else Input).
  Auto,
};

struct Eagle3Config {
  int hidden = 0, target_hidden = 0, intermediate = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int vocab = 0, draft_vocab = 0;
  float rms_eps = 1e-6f;
  bool norm_before_residual = false;
  bool norm_before_fc = false;  // input_norm over the 3*Ht concatenation
  bool fc_norm = false;         // EAGLE-3.1: one RMSNorm per aux chunk
  bool norm_output = false;     // EAGLE-3.1: next g = norm(out)
  bool attention_bias = false;
  std::vector<int> aux_layers;  // eaglet (vLLM "input of layer") numbering, ascending
  std::string key_prefix;       // "midlayer." or "layers.0."
};

struct Eagle3Rows {
  SeqId seq;
  std::vector<int> tokens;  // target-vocabulary ids; one draft position each, appended to seq
  // Tree drafting: RoPE position, tree base and ancestor mask of each token (rows follow the
  // cache length). Empty: a causal chain.
  std::vector<TokenSlot> slots = {};
};

// The draft's tensors by their Hugging Face names (without the layer prefix), wherever they are
// stored: a safetensors checkpoint, or a GGUF file whose names the loader translates.
struct Eagle3TensorSource {
  std::string where;
  std::function<bool(const std::string&)> has;
  std::function<kernels::WeightView(const std::string&, int64_t rows, int64_t cols)> matrix;
  std::function<std::vector<float>(const std::string&, int64_t n)> vector;
  std::function<std::vector<int64_t>(int64_t n)> d2t;  // offsets: target id - draft id
};

class Eagle3Draft {
 public:
  // `path`: a Hugging Face directory, or a `.gguf` file made by llama.cpp's converter (architecture
  // `eagle3`, aux ids in its "input of layer" numbering, so `numbering` does not apply). `target`
  // supplies embed_tokens / lm_head when the draft has none, and its layer count for the default
  // aux ids. `numbering` says how the config's aux ids are counted.
  // A checkpoint tensor the resolved flavour does not read is an error naming it, unless
  // `allow_unused_tensors` (then a warning).
  static std::unique_ptr<Eagle3Draft> load(const std::string& path, const Model& target,
                                           AuxNumbering numbering = AuxNumbering::Auto, bool allow_unused_tensors = false);
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
  int to_target_id(int draft_id) const { return draft_id + int(d2t_.empty() ? 0 : d2t_[size_t(draft_id)]); }
  size_t weight_bytes() const;

 private:
  struct Unloaded {};
  Eagle3Draft(Eagle3Config cfg, Rope rope, const Model& target, Unloaded);
  void load_weights(const Eagle3TensorSource& src);

  Eagle3Config cfg_;
  Rope rope_;
  WeightStore weights_;
  const Model& target_;
  kernels::WeightView fc_, q_, k_, v_, o_, gate_, up_, down_, lm_head_, embed_;
  bool own_embed_ = false;
  std::vector<float> input_ln_, hidden_norm_, post_ln_, norm_, input_norm_, fc_norms_[3];
  std::vector<float> q_bias_, k_bias_, v_bias_, o_bias_;
  std::set<std::string> used_;  // checkpoint tensors load_weights read (strict loading)
  std::vector<int64_t> d2t_;
  AttentionShape attn_;
  struct Scratch {
    ScratchBuffer x, e, residual, q, k, v, attn, tmp, hn, gate, up, normed, sel;
    std::vector<TokenSlot> slots;
    std::vector<int> tokens;
  };
  mutable ScratchPool<Scratch> scratch_;
};

// Whether a Hugging Face tensor name (without prefix) belongs to the decoder layer
// ("midlayer." / "layers.0." in checkpoints, "blk.0." in GGUF) rather than to the draft as a whole.
bool eagle3_layer_tensor(const std::string& name);

// Parses a draft config.json (either flavour); exposed for tests.
Eagle3Config parse_eagle3_config(const JsonConfig& cfg, int target_layers, AuxNumbering numbering);
// The `eagle_config` object an exported draft carries for SGLang: vLLM reads the top-level ids
// ("entering layer j"); SGLang reads these, adding one to every id in old versions and, since
// PR #25454, only when the first id is 1. Output-numbered ids (j - 1) satisfy both for the usual
// taps (first entering layer 2); ids that include the embeddings (0) cannot be written that way
// and are left out.
nlohmann::json eagle_config_for_export(const std::vector<int>& aux_layers);

}  // namespace eaglet
