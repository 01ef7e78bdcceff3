#include "io/json_config.h"

#include "core/error.h"
#include "io/mapped_file.h"

namespace eaglet {

JsonConfig JsonConfig::load(const std::string& path) {
  if (!file_exists(path)) fail("{}: file not found", path);
  try {
    auto j = nlohmann::json::parse(read_text_file(path));
    if (!j.is_object()) fail("{}: expected a JSON object", path);
    return JsonConfig(std::move(j), path);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: bad JSON: {}", path, e.what());
  }
}

const nlohmann::json& JsonConfig::at(const std::string& key) const {
  if (!has(key)) fail("{}: missing field '{}'", where_, key);
  return j_[key];
}

int64_t JsonConfig::get_int(const std::string& key) const {
  auto& v = at(key);
  if (!v.is_number_integer()) fail("{}: field '{}' must be an integer", where_, key);
  return v.get<int64_t>();
}

int64_t JsonConfig::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double JsonConfig::get_double(const std::string& key) const {
  auto& v = at(key);
  if (!v.is_number()) fail("{}: field '{}' must be a number", where_, key);
  return v.get<double>();
}

double JsonConfig::get_double(const std::string& key, double fallback) const {
  return has(key) ? get_double(key) : fallback;
}

bool JsonConfig::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  auto& v = at(key);
  if (!v.is_boolean()) fail("{}: field '{}' must be true or false", where_, key);
  return v.get<bool>();
}

std::string JsonConfig::get_string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  auto& v = at(key);
  if (!v.is_string()) fail("{}: field '{}' must be a string", where_, key);
  return v.get<std::string>();
}

std::vector<int64_t> JsonConfig::get_int_list(const std::string& key) const {
  auto& v = at(key);
  std::vector<int64_t> out;
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (!v.is_array()) fail("{}: field '{}' must be a list of integers", where_, key);
  for (auto& e : v) {
    if (!e.is_number_integer()) fail("{}: field '{}' must be a list of integers", where_, key);
    out.push_back(e.get<int64_t>());
  }
  return out;
}

JsonConfig JsonConfig::sub(const std::string& key) const {
  auto& v = at(key);
  if (!v.is_object()) fail("{}: field '{}' must be an object", where_, key);
  return JsonConfig(v, where_ + ":" + key);
}

}  // namespace eaglet
