// What every target model offers the engine: one batched forward over many sequences, each
// contributing any number of new tokens, returning logits for chosen rows and hidden-state taps.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "kernels/ops.h"
#include "models/rope.h"

namespace eaglet {

struct ModelConfig {
  std::string architecture;
  std::string dir;  // where it was loaded from ("<built-in>" for the random model)
  int hidden = 0, intermediate = 0, num_layers = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int vocab = 0;
  int max_position = 4096;
  float rms_eps = 1e-5f;
  int bos_token = -1;
  std::vector<int> eos_tokens;
  std::string dtype_name;  // storage dtype of the big matrices, for logs and benchmarks
  // RoPE base and scaling, which a draft trained for the model inherits (TorchSpec / SpecForge do).
  double rope_theta = 10000.0;
  std::string rope_scaling = "default";  // type
  nlohmann::json rope_scaling_config;    // the rope_scaling object (null: none)
  void set_rope(const Rope& r) {
    rope_theta = r.theta;
    rope_scaling = r.scaling;
    rope_scaling_config = r.scaling_config;
  }
};

// One sequence's share of a forward: `tokens` are appended at the sequence's current KV length.
struct SeqChunk {
  SeqId seq = 0;
  std::vector<int> tokens;
  // Indices into `tokens` whose logits are wanted (e.g. the last one for decode, all k+1 when
  // verifying a draft); rows appear in the output in chunk order, then index order.
  std::vector<int> logit_rows;
  // Empty: a chain. Otherwise a token tree: parents[i] < i is the index in `tokens` of token i's
  // parent, -1 for the root (whose parent is the sequence's last cached token). Each token sees
  // the cached prefix and its ancestors; its RoPE position is the cache length plus its depth.
  // After the forward the cache holds every tree token; KvCache::keep_rows keeps a path.
  std::vector<int> parents = {};
};

struct ForwardBatch {
  std::vector<SeqChunk> chunks;
  // Hidden-state taps: the residual stream entering layer id (0 = embeddings, L = output of the
  // last layer before the final norm). Returned for every processed token, in this order.
  std::vector<int> tap_layers;
};

struct ForwardOutput {
  std::vector<float> logits;  // [num_logit_rows, vocab]
  int64_t num_logit_rows = 0;
  std::vector<float> taps;    // [num_tokens, tap_layers.size() * hidden]
  int64_t num_tokens = 0;
  // What the forward read, for bandwidth figures: weight bytes, and for MoE models the distinct
  // experts touched (summed over layers).
  size_t weight_bytes_read = 0;
  int64_t experts_touched = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  // Shape of the KV cache this model needs, with room for `num_blocks` blocks.
  virtual KvCacheShape kv_shape(int64_t num_blocks, int block_size = 16) const = 0;
  // Runs the batch on `pool`'s threads. Throws eaglet::Error when the cache has no room for the
  // batch; the cache is then unchanged. Activations come from reused scratch (models/scratch.h).
  virtual void forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, ForwardOutput* out) = 0;

  // What an EAGLE-3 draft shares with its target and what the trainer needs to score it.
  virtual void embed(const int* tokens, int64_t n, float* out) const = 0;
  virtual const kernels::WeightView& lm_head() const = 0;
  virtual const kernels::WeightView& embed_view() const = 0;  // [vocab, hidden]
  virtual void final_norm(const float* x, int64_t rows, float* out) const = 0;
  // Whether forward() takes token trees (SeqChunk::parents); MiniMax sparse attention does not.
  virtual bool supports_token_trees() const { return true; }
  // Bytes of weights one decode step reads (for bandwidth figures).
  virtual size_t weight_bytes_per_token() const = 0;
  // Every matrix a forward multiplies by (MoE: every expert), for reports of the kernels run.
  virtual std::vector<const kernels::WeightView*> matrices() const = 0;
  // Re-stores the decoder layers' projection matrices as GGUF blocks (Q8_0 or Q4_0, round to
  // nearest; embeddings and lm_head stay as loaded), so a safetensors model runs quantised with
  // no conversion step. Throws for architectures that do not support it.
  virtual void quantize_weights(kernels::QuantScheme scheme);
};

// `--quantize`: "" / "none", "q8_0", "q4_0" (throws naming the option for anything else).
kernels::QuantScheme parse_quantize_option(const std::string& s, const std::string& option = "--quantize");

// The Hugging Face fields every decoder config shares (hidden_size, num_attention_heads, head_dim,
// vocab_size, rms_norm_eps, special ids, ...), checked for consistency.
class JsonConfig;
// The checkpoint must hold exactly the `in_config` layers the config names (`field`): with fewer,
// a config of 2^31 - 1 layers ran out of memory sizing them before any tensor was missed; with
// more, the extra layers were ignored and the output silently changed. `prefix` names them.
// One more than the highest N among tensor `names` of the form prefix + N + "." (0 when none).
int numbered_layer_count(const std::vector<std::string>& names, const std::string& prefix);
void check_layer_count(int in_checkpoint, int in_config, const std::string& where, const std::string& field,
                       const std::string& prefix);
ModelConfig parse_model_config(const JsonConfig& cfg, const std::string& dir);
// rms_norm_eps (default 1e-6), which must lie in (0, 1).
float parse_rms_norm_eps(const JsonConfig& cfg);

// Loads `dir` (config.json + safetensors) with the architecture its config names, or a
// llama.cpp `.gguf` file (llama, qwen2, qwen3).
std::unique_ptr<Model> load_model(const std::string& dir);
bool is_gguf_path(const std::string& path);
// A small Llama with seeded random weights, so every command works without a checkpoint.
std::unique_ptr<Model> make_builtin_model(uint64_t seed = 1234);
std::vector<std::string> registered_architectures();

}  // namespace eaglet
