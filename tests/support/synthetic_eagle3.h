// Writes random EAGLE-3 drafts in every key/config variant real checkpoints use.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace eaglet {
class Eagle3Draft;
}

namespace eaglet::test {

// `d`'s logits of every row for the tokens {5, 9, 2, 7, 30} over random taps (seed 11).
std::vector<float> fixed_prompt_logits(const Eagle3Draft& d);

struct DraftSpec {
  bool speculators_config = false;  // Eagle3Speculator + transformer_layer_config (else LlamaForCausalLMEagle3)
  bool vllm_keys = false;           // layers.0.* (else midlayer.*)
  int hidden = 48, target_hidden = 48, intermediate = 64, heads = 4, kv_heads = 2, head_dim = 12;
  int vocab = 97, draft_vocab = 97;
  bool own_embed = false, own_lm_head = true;
  bool norm_before_residual = false, norm_before_fc = false, fc_norm = false, norm_output = false;
  bool flags_in_eagle_config = false;  // norm_before_fc / fc_norm / norm_output under eagle_config
  int layers = 1;                      // num_hidden_layers (later layers: layers.i.*, H-wide attention input)
  bool hidden_norm_in_every_layer = false;  // a hidden_norm in layers > 0 too, as vLLM's modules hold one
  bool qwen3_layer = false;            // Eagle3Qwen3ForCausalLM (speculators: layer model_type qwen3) + q/k norms
  bool attention_bias = false;         // q/k/v biases (and o_proj's for a Llama layer)
  bool rope_parameters = false;        // transformers v5: the RoPE base under rope_parameters
  double rope_theta = 10000.0;
  std::vector<int> aux_ids;        // empty: not in the config (defaults apply)
  bool aux_in_eagle_config = false;
  bool write_d2t = true;
  float scale = 0.15f;
  uint64_t seed = 99;
  DType dtype = DType::F32;
};

void write_draft(const std::string& dir, const DraftSpec& s);
// The byte-vocabulary target (test_util's) with every lm_head row zeroed but those of target ids
// 0, 3 and 6, which a draft with draft_vocab 3 holds (write_draft's d2t: every third id): its
// drafts are then right some of the time, so speculation has something to accept.
void write_steered_byte_target(const std::string& dir);
inline void PrintTo(const DraftSpec& s, std::ostream* os) { *os << (s.vllm_keys ? "layers.0" : "midlayer") << " draft"; }

}  // namespace eaglet::test
