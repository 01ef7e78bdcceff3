#include "models/registry.h"

#include "core/error.h"
#include "io/mapped_file.h"
#include "models/decoder.h"

namespace eaglet {

ModelRegistry& ModelRegistry::instance() {
  static ModelRegistry* r = [] {
    auto* reg = new ModelRegistry();
    register_llama(*reg);
    register_qwen2(*reg);
    register_qwen3(*reg);
    register_minimax_m2(*reg);
    register_minimax_m3(*reg);
    return reg;
  }();
  return *r;
}

void ModelRegistry::add(const std::string& architecture, ModelFactory factory) {
  factories_[architecture] = std::move(factory);
}

const ModelFactory* ModelRegistry::find(const std::string& architecture) const {
  auto it = factories_.find(architecture);
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> out;
  for (auto& [n, f] : factories_) out.push_back(n);
  return out;
}

std::vector<std::string> registered_architectures() { return ModelRegistry::instance().names(); }

bool is_gguf_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

std::unique_ptr<Model> load_model(const std::string& dir) {
  if (is_gguf_path(dir)) {
    if (!file_exists(dir)) fail("{}: model file not found", dir);
    return load_gguf_model(dir);
  }
  const std::string path = dir + "/config.json";
  if (!file_exists(dir)) fail("{}: model directory not found", dir);
  JsonConfig cfg = JsonConfig::load(path);
  const auto& raw = cfg.raw();
  if (!raw.contains("architectures") || !raw["architectures"].is_array() || raw["architectures"].empty() ||
      !raw["architectures"][0].is_string())
    fail("{}: missing field 'architectures'", path);
  const std::string arch = raw["architectures"][0].get<std::string>();
  const ModelFactory* f = ModelRegistry::instance().find(arch);
  if (!f) {
    std::string known;
    for (auto& n : ModelRegistry::instance().names()) known += (known.empty() ? "" : ", ") + n;
    fail("{}: unknown architecture '{}' (supported: {})", path, arch, known);
  }
  return (*f)(dir, cfg);
}

}  // namespace eaglet
