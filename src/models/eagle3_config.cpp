#include "models/eagle3_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "models/model.h"

namespace eaglet {

namespace {

// vLLM's registry names (and the target architectures its EAGLEConfig prefixes with "Eagle3"),
// by the decoder layer they run.
const char* const kLlamaArchitectures[] = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "LlamaForCausalLM",
                                           "PeagleLlamaForCausalLM", "Eagle3MiniMaxM2ForCausalLM", "Eagle3Speculator"};
const char* const kQwen3Architectures[] = {"Eagle3Qwen3ForCausalLM", "PeagleQwen3ForCausalLM", "Qwen3ForCausalLM"};

bool listed(const char* const* begin, const char* const* end, const std::string& name) {
  return std::find_if(begin, end, [&](const char* a) { return name == a; }) != end;
}

std::string fmt_bool(bool b) { return b ? "true" : "false"; }

}  // namespace

JsonConfig eagle3_layer_config(const JsonConfig& top) {
  return top.has("transformer_layer_config") ? top.sub("transformer_layer_config") : top;
}

std::string Eagle3Config::describe() const {
  std::string s;
  for (const auto& [what, value] : resolved) s += (s.empty() ? "" : ", ") + what + "=" + value;
  return s;
}

DraftSemantics parse_draft_semantics(const std::string& name) {
  if (name == "vllm" || name == "auto") return DraftSemantics::Vllm;
  if (name == "specforge-legacy") return DraftSemantics::SpecForgeLegacy;
  fail("--draft-semantics must be 'auto', 'vllm' or 'specforge-legacy' (got '{}')", name);
}

const char* draft_semantics_name(DraftSemantics s) {
  return s == DraftSemantics::Vllm ? "vllm" : "specforge-legacy";
}

namespace {
// Records how a setting was resolved, for the one-line flavour report.
void note(Eagle3Config& c, const std::string& what, const std::string& value, const std::string& source) {
  c.resolved.emplace_back(what, fmt::format("{} ({})", value, source));
}

// The decoder layer, as vLLM picks its class: the architecture name; for speculators, the layer
// config's model_type (its own architecture is always Eagle3Speculator).
void read_layer_type(Eagle3Config& c, const JsonConfig& top, const JsonConfig& layer, bool speculators) {
  std::vector<std::string> archs;
  if (top.has("architectures")) {
    EAGLET_CHECK(top.raw()["architectures"].is_array(), "{}: 'architectures' must be a list of names", top.where());
    for (const auto& a : top.raw()["architectures"])
      if (a.is_string()) archs.push_back(a.get<std::string>());
  }
  const std::string arch = archs.empty() ? "" : archs[0];
  const std::string layer_type = layer.get_string("model_type", "llama");
  if (speculators) {
    EAGLET_CHECK(layer_type == "llama" || layer_type == "qwen3",
                 "{}: model_type '{}': eaglet runs EAGLE-3 drafts with Llama or Qwen3 decoder layers (a '{}' layer has "
                 "other tensors and math)", layer.where(), layer_type, layer_type);
    c.layer = layer_type == "qwen3" ? Eagle3Layer::Qwen3 : Eagle3Layer::Llama;
    note(c, "layer", layer_type, "transformer_layer_config.model_type");
  } else if (!arch.empty()) {
    const bool qwen3 = listed(std::begin(kQwen3Architectures), std::end(kQwen3Architectures), arch);
    EAGLET_CHECK(qwen3 || listed(std::begin(kLlamaArchitectures), std::end(kLlamaArchitectures), arch),
                 "{}: architecture '{}' is not an EAGLE-3 draft eaglet runs (Llama layer: {}; Qwen3 layer: {})",
                 top.where(), arch, fmt::join(kLlamaArchitectures, ", "), fmt::join(kQwen3Architectures, ", "));
    c.layer = qwen3 ? Eagle3Layer::Qwen3 : Eagle3Layer::Llama;
    note(c, "layer", qwen3 ? "qwen3" : "llama", "architectures " + arch);
  } else {
    EAGLET_CHECK(layer_type == "llama" || layer_type == "qwen3" || layer_type == "eagle3",
                 "{}: model_type '{}' with no architectures: eaglet runs EAGLE-3 drafts with Llama or Qwen3 decoder "
                 "layers", top.where(), layer_type);
    c.layer = layer_type == "qwen3" ? Eagle3Layer::Qwen3 : Eagle3Layer::Llama;
    note(c, "layer", layer_type == "qwen3" ? "qwen3" : "llama", "model_type, no architectures");
  }
}

// Widths, heads, vocabularies and layer count, checked as a target's config is (parse_model_config):
// a draft runs the same attention.
void read_shape(Eagle3Config& c, const JsonConfig& top, const JsonConfig& layer) {
  c.hidden = layer.get_size("hidden_size");
  c.intermediate = layer.get_size("intermediate_size");
  c.num_heads = layer.get_size("num_attention_heads");
  c.num_kv_heads = layer.get_size("num_key_value_heads", c.num_heads);
  c.head_dim = layer.get_size("head_dim", c.hidden / c.num_heads);
  c.vocab = layer.has("vocab_size") ? layer.get_size("vocab_size") : top.get_size("vocab_size");
  c.rms_eps = parse_rms_norm_eps(layer);
  c.attention_bias = layer.get_bool("attention_bias", false);
  c.draft_vocab = top.get_size("draft_vocab_size", c.vocab);
  c.target_hidden = top.get_size("target_hidden_size", c.hidden);
  note(c, "hidden", std::to_string(c.hidden),
       top.has("target_hidden_size") ? fmt::format("target {}", c.target_hidden) : "target's = draft's");
  note(c, "heads", fmt::format("{}/{}x{}", c.num_heads, c.num_kv_heads, c.head_dim),
       layer.has("head_dim") ? "head_dim" : "hidden/heads");
  note(c, "vocab", fmt::format("{}/{}", c.draft_vocab, c.vocab), top.has("draft_vocab_size") ? "draft_vocab_size" : "full");
  // vLLM builds num_hidden_layers decoder layers: the first reads [embedding, hidden] (2H), the
  // others are plain decoder layers over the residual stream.
  c.num_layers = layer.get_size("num_hidden_layers", 1);
  note(c, "layers", std::to_string(c.num_layers), layer.has("num_hidden_layers") ? "num_hidden_layers" : "default");
  // A sliding-window draft layer attends differently from eaglet's full attention.
  if (layer.has("layer_types")) {
    const auto& lt = layer.raw()["layer_types"];
    EAGLET_CHECK(!(lt.is_array() && !lt.empty() && lt[0] == "sliding_attention"),
                 "{}: layer_types[0] is 'sliding_attention'; eaglet's draft attends to the full context", layer.where());
  }
  EAGLET_CHECK(c.hidden > 0 && c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0,
               "{}: bad draft attention shape (hidden {}, heads {}, kv heads {})", top.where(), c.hidden, c.num_heads,
               c.num_kv_heads);
  EAGLET_CHECK(c.vocab > 0 && c.draft_vocab > 0, "{}: vocab_size and draft_vocab_size must be positive", top.where());
  EAGLET_CHECK(c.head_dim % 2 == 0, "{}: head_dim {} must be even", layer.where(), c.head_dim);
  if (layer.has("max_position_embeddings")) layer.get_size("max_position_embeddings");  // in [1, 2^31)
  EAGLET_CHECK(c.draft_vocab <= c.vocab, "{}: draft_vocab_size {} is larger than vocab_size {}", top.where(),
               c.draft_vocab, c.vocab);
}

// The flavour flags: vLLM reads them from eagle_config first, then the top level.
void read_flavour(Eagle3Config& c, const JsonConfig& top, const JsonConfig& layer, bool speculators,
                  const Eagle3LoadOptions& opts) {
  const bool nested = top.has("eagle_config");
  auto flag = [&](const char* key, bool fallback, const char* fallback_source) {
    bool v = fallback;
    std::string source = fallback_source;
    if (nested && top.sub("eagle_config").has(key)) {
      v = top.sub("eagle_config").get_bool(key, fallback);
      source = "eagle_config";
    } else if (top.has(key)) {
      v = top.get_bool(key, fallback);
      source = "top level";
    }
    note(c, key, fmt_bool(v), source);
    return v;
  };
  // vLLM's speculators reader defaults norm_before_residual to true; every other layout to false.
  c.norm_before_residual = flag("norm_before_residual", speculators, speculators ? "speculators default" : "default");
  c.norm_before_fc = flag("norm_before_fc", false, "default");
  c.fc_norm = flag("fc_norm", false, "default");
  c.norm_output = flag("norm_output", false, "default");
  note(c, "attention_bias", fmt_bool(c.attention_bias), layer.has("attention_bias") ? "config" : "default");
  c.semantics = opts.semantics;
  note(c, "norm_output semantics", draft_semantics_name(c.semantics),
       c.semantics == DraftSemantics::Vllm ? "default, as vLLM/SGLang run it" : "--draft-semantics");
  // RoPE base: transformers v5 keeps it in rope_parameters (Rope::from_config reads both).
  const bool v5 = layer.has("rope_parameters");
  if (layer.has("rope_theta")) note(c, "rope_theta", fmt::format("{:g}", layer.get_double("rope_theta")), "rope_theta");
  else if (v5 && layer.sub("rope_parameters").has("rope_theta"))
    note(c, "rope_theta", fmt::format("{:g}", layer.sub("rope_parameters").get_double("rope_theta")), "rope_parameters");
  else note(c, "rope_theta", "10000", "default");
}

// The three target layers the draft taps, in eaglet's "entering layer j" numbering: given at the
// top level or in eagle_config (SGLang's output-of-layer numbering there is shifted), else the
// default (2, L/2, L-3).
void read_aux_layers(Eagle3Config& c, const JsonConfig& top, int target_layers, const Eagle3LoadOptions& opts) {
  const bool nested = top.has("eagle_config");
  std::vector<int64_t> ids;
  std::string source = "default (2, L/2, L-3)";
  if (top.has("eagle_aux_hidden_state_layer_ids")) {
    ids = top.get_int_list("eagle_aux_hidden_state_layer_ids");
    source = "top level";
  } else if (nested && top.sub("eagle_config").has("eagle_aux_hidden_state_layer_ids")) {
    ids = top.sub("eagle_config").get_int_list("eagle_aux_hidden_state_layer_ids");
    source = "eagle_config";
  }
  // Given but empty is not absent: the draft was trained on some layers, and the default guess
  // would feed it others.
  EAGLET_CHECK(!(ids.empty() && source != "default (2, L/2, L-3)"),
               "{}: eagle_aux_hidden_state_layer_ids ({}) is empty; give the 3 target layers the draft reads, or leave "
               "the field out for the default (2, L/2, L-3)", top.where(), source);
  const bool nested_only = source == "eagle_config";
  if (ids.empty()) {
    ids = {2, target_layers / 2, target_layers - 3};
  } else if (opts.numbering == AuxNumbering::Output ||
             (opts.numbering == AuxNumbering::Auto && nested_only && ids[0] == 1)) {
    for (auto& i : ids) i += 1;  // "output of layer i" is the input of layer i + 1
    source += opts.numbering == AuxNumbering::Output ? ", output-of-layer numbering, +1"
                                                     : ", first id 1: output-of-layer numbering as SGLang reads it, +1";
  }
  EAGLET_CHECK(ids.size() == 3, "{}: expected 3 aux hidden-state layer ids, got {}", top.where(), ids.size());
  for (auto i : ids)
    EAGLET_CHECK(i >= 0 && i <= target_layers, "{}: aux layer id {} is outside the target's layers [0, {}]",
                 top.where(), i, target_layers);
  for (auto i : ids) c.aux_layers.push_back(int(i));
  std::sort(c.aux_layers.begin(), c.aux_layers.end());
  note(c, "taps entering layers", fmt::format("{}", fmt::join(c.aux_layers, "/")), source);
}
}  // namespace

Eagle3Config parse_eagle3_config(const JsonConfig& top, int target_layers, const Eagle3LoadOptions& opts) {
  const bool speculators = top.has("transformer_layer_config");
  const JsonConfig layer = eagle3_layer_config(top);
  Eagle3Config c;
  read_layer_type(c, top, layer, speculators);
  read_shape(c, top, layer);
  read_flavour(c, top, layer, speculators, opts);
  read_aux_layers(c, top, target_layers, opts);
  return c;
}

nlohmann::json eagle_config_for_export(const std::vector<int>& aux) {
  nlohmann::json c = {{"use_aux_hidden_state", true}};
  if (std::all_of(aux.begin(), aux.end(), [](int j) { return j >= 1; })) {
    std::vector<int> out;
    for (int j : aux) out.push_back(j - 1);
    c["eagle_aux_hidden_state_layer_ids"] = out;
  }
  return c;
}

nlohmann::json eagle3_config_json(const Eagle3Config& c, const Rope& rope, int max_position) {
  EAGLET_CHECK(c.layer == Eagle3Layer::Llama, "a Qwen3-layer EAGLE-3 draft cannot be written as LlamaForCausalLMEagle3");
  nlohmann::json j = {{"architectures", {"LlamaForCausalLMEagle3"}},
                      {"model_type", "llama"},
                      {"hidden_size", c.hidden},
                      {"intermediate_size", c.intermediate},
                      {"num_attention_heads", c.num_heads},
                      {"num_key_value_heads", c.num_kv_heads},
                      {"head_dim", c.head_dim},
                      {"num_hidden_layers", c.num_layers},
                      {"hidden_act", "silu"},
                      {"vocab_size", c.vocab},
                      {"draft_vocab_size", c.draft_vocab},
                      {"target_hidden_size", c.target_hidden},
                      {"max_position_embeddings", max_position},
                      {"rms_norm_eps", c.rms_eps},
                      {"rope_theta", rope.theta},
                      {"rope_scaling", rope.scaling_config},
                      {"tie_word_embeddings", false},
                      {"attention_bias", c.attention_bias},
                      {"norm_before_residual", c.norm_before_residual},
                      {"eagle_aux_hidden_state_layer_ids", c.aux_layers},
                      {"eagle_config", eagle_config_for_export(c.aux_layers)}};
  // EAGLE-3.1's flags only where set, so a plain draft's config is the plain layout.
  if (c.norm_before_fc) j["norm_before_fc"] = true;
  if (c.fc_norm) j["fc_norm"] = true;
  if (c.norm_output) j["norm_output"] = true;
  return j;
}

}  // namespace eaglet
