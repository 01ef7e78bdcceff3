// Resolving an EAGLE-3 draft's config.json into one flavour, the way the servers read it.
// Every published layout is covered: EAGLE / SpecForge / TorchSpec (`LlamaForCausalLMEagle3`,
// top-level keys), vLLM's Qwen3-layer class (`Eagle3Qwen3ForCausalLM`), speculators
// (`Eagle3Speculator` + `transformer_layer_config`), flags nested under `eagle_config`, and
// transformers v5 (`rope_parameters`). Each resolved value remembers where it came from, and the
// loader logs them all in one line, so a draft never runs on a silently assumed default.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/json_config.h"
#include "models/rope.h"

namespace eaglet {

// How aux-layer ids in a draft config are numbered.
enum class AuxNumbering {
  Input,   // vLLM / EAGLE / speculators / llama.cpp: id j = residual stream entering layer j
  Output,  // SGLang / SpecForge / TorchSpec: id i = output of layer i (= our i + 1)
  // As the servers decide: top-level ids as vLLM reads them (Input); ids found only under
  // eagle_config as SGLang reads them since PR #25454 (Output when the first id is 1, else Input).
  Auto,
};

// What `norm_output` means. vLLM, SGLang, speculators, TorchSpec and SpecForge since PR #879:
// logits = lm_head(norm(out)) and the next state is norm(out) with the flag, out without.
// SpecForge from PR #568 to #879 trained differently: the next state is always out, and the flag
// only says whether lm_head reads norm(out) (true) or out (false). Nothing in such a draft's
// config tells the two apart, so that reading is opt-in.
enum class DraftSemantics { Vllm, SpecForgeLegacy };

enum class Eagle3Layer {
  Llama,  // LlamaDecoderLayer: o_proj bias when attention_bias
  Qwen3,  // Qwen3DecoderLayer: per-head q_norm / k_norm before RoPE, no o_proj bias
};

struct Eagle3LoadOptions {
  AuxNumbering numbering = AuxNumbering::Auto;
  DraftSemantics semantics = DraftSemantics::Vllm;
  bool allow_unused_tensors = false;  // else a checkpoint tensor the flavour does not read is an error
};

struct Eagle3Config {
  int hidden = 0, target_hidden = 0, intermediate = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int vocab = 0, draft_vocab = 0;
  int num_layers = 1;  // decoder layers (vLLM's num_hidden_layers); layer 0 reads [embedding, hidden]
  float rms_eps = 1e-6f;
  Eagle3Layer layer = Eagle3Layer::Llama;
  DraftSemantics semantics = DraftSemantics::Vllm;
  bool norm_before_residual = false;
  bool norm_before_fc = false;  // input_norm over the 3*Ht concatenation
  bool fc_norm = false;         // EAGLE-3.1: one RMSNorm per aux chunk
  bool norm_output = false;     // EAGLE-3.1: next g = norm(out) (see DraftSemantics)
  bool attention_bias = false;
  std::vector<int> aux_layers;  // eaglet (vLLM "input of layer") numbering, ascending
  std::string key_prefix;       // layer 0's: "midlayer." or "layers.0." (later layers: "layers.i.")
  // (what, value and where it came from), in resolution order, for the flavour log line.
  std::vector<std::pair<std::string, std::string>> resolved;

  bool lm_head_reads_norm() const { return semantics == DraftSemantics::Vllm || norm_output; }
  bool feeds_back_norm() const { return semantics == DraftSemantics::Vllm && norm_output; }
  // "what=value (source), ..." over `resolved`.
  std::string describe() const;
};

// Parses a draft config.json (any layout); the JSON of the decoder layer's fields (top level, or
// speculators' transformer_layer_config) is what RoPE is read from.
Eagle3Config parse_eagle3_config(const JsonConfig& cfg, int target_layers, const Eagle3LoadOptions& opts = {});
JsonConfig eagle3_layer_config(const JsonConfig& cfg);

// The `eagle_config` object an exported draft carries for SGLang: vLLM reads the top-level ids
// ("entering layer j"); SGLang reads these, adding one to every id in old versions and, since
// PR #25454, only when the first id is 1. Output-numbered ids (j - 1) satisfy both for the usual
// taps (first entering layer 2); ids that include the embeddings (0) cannot be written that way
// and are left out.
nlohmann::json eagle_config_for_export(const std::vector<int>& aux_layers);

// The config.json of a draft in the plain layout (LlamaForCausalLMEagle3, top-level keys, aux ids
// in vLLM's numbering plus eagle_config for SGLang) that parse_eagle3_config reads back to `c`:
// what eaglet's export writes for vLLM, SGLang and llama.cpp. A Qwen3-layer draft is an error.
nlohmann::json eagle3_config_json(const Eagle3Config& c, const Rope& rope, int max_position);

// "vllm" | "specforge-legacy" (also accepts "auto", which is vllm: no config key tells them apart).
DraftSemantics parse_draft_semantics(const std::string& name);
const char* draft_semantics_name(DraftSemantics s);

}  // namespace eaglet
