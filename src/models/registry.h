// Architectures by the name config.json's `architectures` gives them. Each architecture file
// exposes one register_* function; registry.cpp calls them all (explicitly, so a static library
// link cannot drop one).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "io/json_config.h"
#include "models/model.h"

namespace eaglet {

using ModelFactory = std::function<std::unique_ptr<Model>(const std::string& dir, const JsonConfig& cfg)>;

class ModelRegistry {
 public:
  static ModelRegistry& instance();
  void add(const std::string& architecture, ModelFactory factory);
  const ModelFactory* find(const std::string& architecture) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, ModelFactory> factories_;
};

void register_llama(ModelRegistry& r);
void register_qwen2(ModelRegistry& r);
void register_qwen3(ModelRegistry& r);
void register_minimax_m2(ModelRegistry& r);
void register_minimax_m3(ModelRegistry& r);

}  // namespace eaglet
