#include "train/train_config.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <sstream>

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
  EAGLET_FIELD("model.draft.hidden_size", draft.hidden);
  EAGLET_FIELD("model.draft.intermediate_size", draft.intermediate);
  EAGLET_FIELD("model.draft.num_attention_heads", draft.num_heads);
  EAGLET_FIELD("model.draft.num_key_value_heads", draft.num_kv_heads);
  EAGLET_FIELD("model.draft.head_dim", draft.head_dim);
  EAGLET_FIELD("model.draft.draft_vocab_size", draft.draft_vocab);
  EAGLET_FIELD("data.path", data_path);
  EAGLET_FIELD("data.num_samples", num_samples);
  EAGLET_FIELD("data.max_length", max_length);
  EAGLET_FIELD("data.eval_samples", eval_samples);
  EAGLET_FIELD("regen.enabled", regen);
  EAGLET_FIELD("regen.temperature", regen_temperature);
  EAGLET_FIELD("regen.max_new_tokens", regen_max_new_tokens);
  EAGLET_FIELD("regen.prefix_tokens", regen_prefix_tokens);
  EAGLET_FIELD("regen.batch_size", regen_batch);
  EAGLET_FIELD("regen.samples_per_prompt", regen_samples_per_prompt);
  EAGLET_FIELD("training.ttt_steps", ttt_steps);
  EAGLET_FIELD("training.batch_size", batch_size);
  EAGLET_FIELD("training.steps", steps);
  EAGLET_FIELD("training.lr", lr);
  EAGLET_FIELD("training.warmup_ratio", warmup_ratio);
  EAGLET_FIELD("training.grad_clip", grad_clip);
  EAGLET_FIELD("training.step_weight", step_weight);
  EAGLET_FIELD("training.save_every", save_every);
  EAGLET_FIELD("training.log_every", log_every);
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

void apply(TrainConfig& c, const std::map<std::string, Field>& table, const std::string& key, const std::string& value) {
  auto it = table.find(key);
  if (it == table.end()) {
    // A bare key is accepted when exactly one section has it (e.g. `steps=100`).
    std::string match;
    for (auto& [k, f] : table)
      if (k.size() > key.size() && k.compare(k.size() - key.size() - 1, std::string::npos, "." + key) == 0)
        match = match.empty() ? k : "ambiguous";
    if (match.empty() || match == "ambiguous") fail("config: unknown key '{}'", key);
    it = table.find(match);
  }
  it->second.set(c, value);
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
    for (auto& [k, v] : kv) {
      if (!table.count(k)) fail("{}: unknown key '{}'", yaml_path, k);
      apply(c, table, k, v);
    }
  }
  for (auto& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos) fail("config override '{}' is not key=value", o);
    apply(c, table, o.substr(0, eq), o.substr(eq + 1));
  }
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
}

std::string TrainConfig::to_yaml() const {
  std::ostringstream out;
  for (auto& [k, f] : fields()) out << k << ": " << f.get(*this) << "\n";
  return out.str();
}

}  // namespace eaglet
