#include "train/train_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace eaglet {

namespace {
// One table of every key: its YAML path, how to read it from a string, how to print it.
struct Field {
  std::function<void(TrainConfig&, const std::string&)> set;
  std::function<std::string(const TrainConfig&)> get;
};

template <typename T>
T parse_value(const std::string& key, const std::string& v) {
  try {
    return YAML::Load(v).as<T>();
  } catch (const YAML::Exception&) {
    fail("config: '{}' has a bad value '{}'", key, v);
  }
}

// A path list: one string, or a YAML sequence joined with commas.
std::string parse_paths(const std::string& key, const std::string& v) {
  YAML::Node n;
  try {
    n = YAML::Load(v);
  } catch (const YAML::Exception&) {
    fail("config: '{}' has a bad value '{}'", key, v);
  }
  if (!n.IsSequence()) return parse_value<std::string>(key, v);
  std::string out;
  for (const auto& e : n) out += (out.empty() ? "" : ",") + e.as<std::string>();
  return out;
}

template <typename T>
std::string show(const T& v) {
  YAML::Emitter e;
  e << YAML::Flow << v;
  return e.c_str();
}

std::map<std::string, Field> fields() {
  std::map<std::string, Field> f;
#define EAGLET_FIELD(path, member)                                                                    \
  f[path] = Field{[](TrainConfig& c, const std::string& v) { c.member = parse_value<decltype(c.member)>(path, v); }, \
                  [](const TrainConfig& c) { return show(c.member); }}
  EAGLET_FIELD("output_dir", output_dir);
  EAGLET_FIELD("seed", seed);
  EAGLET_FIELD("model.target", target);
  EAGLET_FIELD("model.aux_layers", aux_layers);
  EAGLET_FIELD("model.lm_head", lm_head);
  EAGLET_FIELD("model.draft_config", draft_config);
  EAGLET_FIELD("model.draft.hidden_size", draft.hidden);
  EAGLET_FIELD("model.draft.intermediate_size", draft.intermediate);
  EAGLET_FIELD("model.draft.num_attention_heads", draft.num_heads);
  EAGLET_FIELD("model.draft.num_key_value_heads", draft.num_kv_heads);
  EAGLET_FIELD("model.draft.head_dim", draft.head_dim);
  EAGLET_FIELD("model.draft.draft_vocab_size", draft.draft_vocab);
  EAGLET_FIELD("model.draft.rope_theta", draft.rope_theta);
  EAGLET_FIELD("model.draft.type", draft.type);
  EAGLET_FIELD("model.draft.fc_norm", draft.fc_norm);
  EAGLET_FIELD("model.draft.norm_output", draft.norm_output);
  EAGLET_FIELD("model.draft.num_hidden_layers", draft.num_layers);
  EAGLET_FIELD("model.draft.block_size", draft.block_size);
  EAGLET_FIELD("model.draft.mask_token_id", draft.mask_token_id);
  EAGLET_FIELD("model.draft.target_layer_ids", draft.target_layer_ids);
  EAGLET_FIELD("model.draft.layer_types", draft.layer_types);
  EAGLET_FIELD("model.draft.sliding_window", draft.sliding_window);
  EAGLET_FIELD("model.draft.causal", draft.causal);
  f["data.path"] = Field{[](TrainConfig& c, const std::string& v) { c.data_path = parse_paths("data.path", v); },
                         [](const TrainConfig& c) { return show(c.data_path); }};
  f["data.eval_path"] = Field{[](TrainConfig& c, const std::string& v) { c.eval_path = parse_paths("data.eval_path", v); },
                              [](const TrainConfig& c) { return show(c.eval_path); }};
  EAGLET_FIELD("data.max_bad_records", max_bad_records);
  EAGLET_FIELD("data.num_samples", num_samples);
  EAGLET_FIELD("data.max_length", max_length);
  EAGLET_FIELD("data.eval_samples", eval_samples);
  EAGLET_FIELD("data.chat_template", chat_template);
  EAGLET_FIELD("regen.enabled", regen);
  EAGLET_FIELD("regen.temperature", regen_temperature);
  EAGLET_FIELD("regen.max_new_tokens", regen_max_new_tokens);
  EAGLET_FIELD("regen.prefix_tokens", regen_prefix_tokens);
  EAGLET_FIELD("regen.batch_size", regen_batch);
  EAGLET_FIELD("regen.samples_per_prompt", regen_samples_per_prompt);
  EAGLET_FIELD("training.ttt_steps", ttt_steps);
  EAGLET_FIELD("training.batch_size", batch_size);
  EAGLET_FIELD("training.steps", steps);
  EAGLET_FIELD("training.num_epochs", num_epochs);
  EAGLET_FIELD("training.lr", lr);
  EAGLET_FIELD("training.warmup_ratio", warmup_ratio);
  EAGLET_FIELD("training.grad_clip", grad_clip);
  EAGLET_FIELD("training.step_weight", step_weight);
  EAGLET_FIELD("training.num_anchors", num_anchors);
  EAGLET_FIELD("training.loss_decay_gamma", loss_decay_gamma);
  EAGLET_FIELD("training.loss_mask_alignment", loss_mask);
  EAGLET_FIELD("training.save_every", save_every);
  EAGLET_FIELD("training.log_every", log_every);
  EAGLET_FIELD("training.eval_every", eval_every);
  EAGLET_FIELD("training.micro_batch_size", micro_batch_size);
  EAGLET_FIELD("training.zero_stage", zero_stage);
  EAGLET_FIELD("training.dist_timeout_s", dist_timeout_s);
  EAGLET_FIELD("training.threads", train_threads);
  EAGLET_FIELD("training.device", device);
  EAGLET_FIELD("training.bf16", bf16);
  EAGLET_FIELD("inference.mode", inference_mode);
  EAGLET_FIELD("inference.workers", inference_workers);
  EAGLET_FIELD("inference.threads", inference_threads);
  EAGLET_FIELD("inference.queue_size", queue_size);
  EAGLET_FIELD("inference.endpoint", zmq_endpoint);
  EAGLET_FIELD("inference.worker_timeout_s", worker_timeout_s);
  EAGLET_FIELD("export.key_style", key_style);
#undef EAGLET_FIELD
  return f;
}

// TorchSpec / SpecForge names (any section) -> eaglet's keys.
const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> a = {
      {"target_model_path", "model.target"},     {"draft_model_config", "model.draft_config"},
      {"train_data_path", "data.path"},          {"eval_data_path", "data.eval_path"},
      {"max_seq_length", "data.max_length"},     {"chat_template", "data.chat_template"},
      {"learning_rate", "training.lr"},          {"max_grad_norm", "training.grad_clip"},
      {"ttt_length", "training.ttt_steps"},      {"micro_batch_size", "training.micro_batch_size"},
      {"num_epochs", "training.num_epochs"},     {"save_interval", "training.save_every"},
      {"eval_interval", "training.eval_every"},  {"log_interval", "training.log_every"},
      {"total_steps", "training.steps"},         {"max_steps", "training.steps"},
      // DFlash: SpecForge's and speculators' names.
      {"max_anchors", "training.num_anchors"},   {"dflash_decay_gamma", "training.loss_decay_gamma"},
      {"draft_block_size", "model.draft.block_size"}, {"num_draft_layers", "model.draft.num_hidden_layers"},
      {"draft_num_hidden_layers", "model.draft.num_hidden_layers"},
  };
  return a;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string leaf(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

// "; did you mean 'X'?" for the nearest key, alias or leaf (compared leaf to leaf when the
// unknown key has a section), or "" when nothing is close.
std::string suggestion(const std::map<std::string, Field>& table, const std::string& key) {
  std::vector<std::pair<std::string, std::string>> known;  // (compare against, show)
  for (auto& [k, f] : table) known.emplace_back(k, k), known.emplace_back(leaf(k), k);
  for (auto& [a, k] : aliases()) known.emplace_back(a, a + "' (= '" + k);
  size_t best = std::string::npos;
  std::string shown;
  for (auto& [cmp, show] : known) {
    const size_t d = std::min(edit_distance(key, cmp), edit_distance(leaf(key), cmp));
    if (d < best) best = d, shown = show;
  }
  if (best > std::max<size_t>(2, leaf(key).size() / 3)) return "";
  return fmt::format("; did you mean '{}'?", shown);
}

// The table key `key` names: itself, an alias (by its last part, hyphens as underscores), or a
// bare key that exactly one section has (e.g. `steps`). Fails naming the nearest known key.
std::string resolve(const std::map<std::string, Field>& table, std::string key, const std::string& where) {
  std::replace(key.begin(), key.end(), '-', '_');
  if (table.count(key)) return key;
  if (auto a = aliases().find(leaf(key)); a != aliases().end()) return a->second;
  std::string match;
  for (auto& [k, f] : table)
    if (k.size() > key.size() && k.compare(k.size() - key.size() - 1, std::string::npos, "." + key) == 0)
      match = match.empty() ? k : "ambiguous";
  if (match == "ambiguous") fail("{}: key '{}' is in several sections; write it with its section", where, key);
  if (match.empty()) fail("{}: unknown key '{}'{}", where, key, suggestion(table, key));
  return match;
}

void apply(TrainConfig& c, const std::map<std::string, Field>& table, const std::string& key, const std::string& value,
           const std::string& where) {
  table.at(resolve(table, key, where)).set(c, value);
}

// A DFlash config.json as the draft's shape: z-lab's layout (block_size at the top level or in
// dflash_config, mask_token_id and target_layer_ids in dflash_config).
void apply_dflash_draft_config(TrainConfig& c, const nlohmann::json& j) {
  c.draft.type = "dflash";
  const nlohmann::json d = j.value("dflash_config", nlohmann::json::object());
  auto integer = [&](const nlohmann::json& o, const char* key, int* dst) {
    if (!o.contains(key)) return;
    EAGLET_CHECK(o[key].is_number_integer(), "{}: '{}' must be an integer", c.draft_config, key);
    *dst = o[key].get<int>();
  };
  // Its sliding-window and causal keys are read where the draft's shape is resolved
  // (dflash_module_options), by the parser that loads published drafts.
  integer(j, "num_hidden_layers", &c.draft.num_layers);
  integer(d, "block_size", &c.draft.block_size);
  integer(j, "block_size", &c.draft.block_size);
  integer(d, "mask_token_id", &c.draft.mask_token_id);
  if (d.contains("target_layer_ids") && c.draft.target_layer_ids.empty()) {
    EAGLET_CHECK(d["target_layer_ids"].is_array(), "{}: dflash_config.target_layer_ids must be a list", c.draft_config);
    c.draft.target_layer_ids = d["target_layer_ids"].get<std::vector<int>>();
  }
}

// SpecForge's draft_model_config: the draft's shape from an HF config.json (keys set explicitly
// in model.draft win).
void apply_draft_config(TrainConfig& c) {
  if (c.draft_config.empty()) return;
  std::ifstream in(c.draft_config);
  EAGLET_CHECK(in.good(), "config: model.draft_config: cannot read '{}'", c.draft_config);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  EAGLET_CHECK(j.is_object(), "{}: not a JSON object", c.draft_config);
  auto take = [&](const char* key, int* dst) {
    if (*dst != 0 || !j.contains(key)) return;
    EAGLET_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() > 0, "{}: '{}' must be a positive integer",
                 c.draft_config, key);
    *dst = j[key].get<int>();
  };
  take("hidden_size", &c.draft.hidden);
  take("intermediate_size", &c.draft.intermediate);
  take("num_attention_heads", &c.draft.num_heads);
  take("num_key_value_heads", &c.draft.num_kv_heads);
  take("head_dim", &c.draft.head_dim);
  take("draft_vocab_size", &c.draft.draft_vocab);
  for (auto [key, dst] : {std::pair{"fc_norm", &c.draft.fc_norm}, std::pair{"norm_output", &c.draft.norm_output}})
    if (j.contains(key)) {
      EAGLET_CHECK(j[key].is_boolean(), "{}: '{}' must be true or false", c.draft_config, key);
      *dst = *dst || j[key].get<bool>();
    }
  if (j.value("architectures", nlohmann::json::array()) == nlohmann::json::array({"DFlashDraftModel"})) {
    apply_dflash_draft_config(c, j);
    return;
  }
  if (j.contains("num_hidden_layers") && j["num_hidden_layers"] != 1)
    fail("{}: num_hidden_layers {} — eaglet trains 1-layer EAGLE-3 drafts", c.draft_config, j["num_hidden_layers"].dump());
}

void walk(const YAML::Node& node, const std::string& prefix, std::vector<std::pair<std::string, std::string>>* out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = prefix + it->first.as<std::string>();
    if (it->second.IsMap()) {
      walk(it->second, key + ".", out);
    } else {
      YAML::Emitter e;
      e << YAML::Flow << it->second;
      out->emplace_back(key, e.c_str());
    }
  }
}
}  // namespace

TrainConfig TrainConfig::load(const std::string& yaml_path, const std::vector<std::string>& overrides) {
  TrainConfig c;
  const auto table = fields();
  if (!yaml_path.empty()) {
    YAML::Node root;
    try {
      root = YAML::LoadFile(yaml_path);
    } catch (const YAML::Exception& e) {
      fail("{}: {}", yaml_path, e.what());
    }
    std::vector<std::pair<std::string, std::string>> kv;
    if (root.IsMap()) walk(root, "", &kv);
    for (auto& [k, v] : kv) apply(c, table, k, v, yaml_path);
  }
  for (auto& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos) fail("config override '{}' is not key=value", o);
    apply(c, table, o.substr(0, eq), o.substr(eq + 1), "command line");
  }
  apply_draft_config(c);
  c.validate();
  return c;
}

void TrainConfig::validate() const {
  EAGLET_CHECK(ttt_steps >= 1 && ttt_steps <= 16, "config: training.ttt_steps must be in [1, 16]");
  EAGLET_CHECK(batch_size >= 1 && steps >= 1, "config: training.batch_size and training.steps must be >= 1");
  EAGLET_CHECK(lr > 0, "config: training.lr must be > 0");
  EAGLET_CHECK(lm_head == "train" || lm_head == "init-from-target" || lm_head == "frozen-target",
               "config: model.lm_head must be train, init-from-target or frozen-target (got '{}')", lm_head);
  EAGLET_CHECK(inference_mode == "thread" || inference_mode == "zmq", "config: inference.mode must be thread or zmq");
  EAGLET_CHECK(key_style == "midlayer" || key_style == "vllm", "config: export.key_style must be midlayer or vllm");
  EAGLET_CHECK(device == "cpu" || device.rfind("cuda", 0) == 0, "config: training.device must be cpu or cuda[:N]");
  EAGLET_CHECK(max_length >= 8, "config: data.max_length must be >= 8");
  EAGLET_CHECK(queue_size >= 1 && inference_workers >= 0, "config: inference.queue_size must be >= 1");
  EAGLET_CHECK(max_bad_records >= 0, "config: data.max_bad_records must be >= 0");
  EAGLET_CHECK(num_epochs >= 0, "config: training.num_epochs must be >= 0");
  EAGLET_CHECK(zero_stage == 0 || zero_stage == 1, "config: training.zero_stage must be 0 or 1 (got {})", zero_stage);
  EAGLET_CHECK(micro_batch_size >= 0 && eval_every >= 0, "config: training.micro_batch_size and eval_every must be >= 0");
  EAGLET_CHECK(dist_timeout_s >= 1, "config: training.dist_timeout_s must be >= 1");
  EAGLET_CHECK(draft.type == "eagle3" || draft.type == "eagle3.1" || draft.type == "dflash",
               "config: model.draft.type must be eagle3, eagle3.1 or dflash (got '{}')", draft.type);
  if (draft.dflash()) {
    EAGLET_CHECK(draft.block_size >= 2 && draft.block_size <= 64, "config: model.draft.block_size must be in [2, 64] (got {})",
                 draft.block_size);
    EAGLET_CHECK(draft.num_layers >= 1, "config: model.draft.num_hidden_layers must be >= 1");
    EAGLET_CHECK(num_anchors >= 1, "config: training.num_anchors must be >= 1");
    EAGLET_CHECK(loss_decay_gamma >= 0, "config: training.loss_decay_gamma must be >= 0 (0: the default)");
    EAGLET_CHECK(aux_layers.empty(), "config: model.aux_layers are EAGLE-3's taps; a DFlash draft reads "
                 "model.draft.target_layer_ids");
    EAGLET_CHECK(draft.causal == "auto" || draft.causal == "true" || draft.causal == "false",
                 "config: model.draft.causal must be auto, true or false (got '{}')", draft.causal);
    EAGLET_CHECK(draft.sliding_window >= 0, "config: model.draft.sliding_window must be >= 0");
    EAGLET_CHECK(!draft.fc_norm && !draft.norm_output && draft.draft_vocab == 0,
                 "config: fc_norm, norm_output and draft_vocab_size are EAGLE-3 settings, not DFlash's");
  } else {
    EAGLET_CHECK(draft.num_layers == 1, "config: model.draft.num_hidden_layers: eaglet trains 1-layer EAGLE-3 drafts");
  }
  EAGLET_CHECK(loss_mask == "torchspec" || loss_mask == "next-token",
               "config: training.loss_mask_alignment must be torchspec or next-token (got '{}')", loss_mask);
}

std::string TrainConfig::to_yaml() const {
  std::ostringstream out;
  for (auto& [k, f] : fields()) out << k << ": " << f.get(*this) << "\n";
  return out.str();
}

}  // namespace eaglet
