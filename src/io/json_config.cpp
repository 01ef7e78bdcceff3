#include "io/json_config.h"

#include <algorithm>

#include "core/error.h"
#include "io/mapped_file.h"

namespace eaglet {

bool json_int64(const nlohmann::json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return false;
    *out = int64_t(u);
    return true;
  }
  if (!v.is_number_integer()) return false;
  *out = v.get<int64_t>();
  return true;
}

std::string json_brief(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

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
  int64_t x;
  if (!json_int64(at(key), &x)) fail("{}: field '{}' must be an integer (got {})", where_, key, json_brief(at(key)));
  return x;
}

int64_t JsonConfig::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

int JsonConfig::get_int_in(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
  const int64_t v = get_int(key, fallback);
  lo = std::max<int64_t>(lo, INT32_MIN);
  hi = std::min<int64_t>(hi, INT32_MAX);
  if (v < lo || v > hi) fail("{}: field '{}' must be in [{}, {}] (got {})", where_, key, lo, hi, v);
  return int(v);
}

int JsonConfig::get_size(const std::string& key) const { return get_size(key, get_int(key)); }

int JsonConfig::get_size(const std::string& key, int64_t fallback) const { return get_int_in(key, fallback, 1, INT32_MAX); }

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
  int64_t x;
  if (json_int64(v, &x)) return {x};
  if (!v.is_array()) fail("{}: field '{}' must be a list of integers", where_, key);
  for (auto& e : v) {
    if (!json_int64(e, &x)) fail("{}: field '{}' must be a list of integers", where_, key);
    out.push_back(x);
  }
  return out;
}

JsonConfig JsonConfig::sub(const std::string& key) const {
  auto& v = at(key);
  if (!v.is_object()) fail("{}: field '{}' must be an object", where_, key);
  return JsonConfig(v, where_ + ":" + key);
}

}  // namespace eaglet
