// Typed access to config.json fields with errors that name the file and the field.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace eaglet {

// The value of a JSON integer as int64, false for anything else. nlohmann stores integers above
// INT64_MAX as unsigned, and get<int>() / get<int64_t>() wrap them (4294967296 became 0), so
// everything read from untrusted JSON goes through this.
bool json_int64(const nlohmann::json& v, int64_t* out);
// A value as it appears in the file, cut to a length that fits an error message.
std::string json_brief(const nlohmann::json& v);

class JsonConfig {
 public:
  JsonConfig(nlohmann::json j, std::string where) : j_(std::move(j)), where_(std::move(where)) {}
  static JsonConfig load(const std::string& path);

  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  // An integer in [lo, hi] that fits an int: sizes are ints downstream, and a larger value must
  // not wrap into a small one. get_size: [1, INT32_MAX] (hidden_size, vocab_size, ...).
  int get_int_in(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const;
  int get_size(const std::string& key) const;
  int get_size(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> get_int_list(const std::string& key) const;
  JsonConfig sub(const std::string& key) const;  // nested object (e.g. rope_scaling)

  const nlohmann::json& raw() const { return j_; }
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& at(const std::string& key) const;
  nlohmann::json j_;
  std::string where_;
};

}  // namespace eaglet
