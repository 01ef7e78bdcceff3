#include "train/dataset.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/prompt_dataset.h"
#include "io/json_config.h"

namespace eaglet {

std::vector<std::string> load_texts(const std::string& path, int limit) {
  return load_prompts(path, limit <= 0 ? -1 : limit);
}

std::vector<TrainSample> tokenize_texts(const std::vector<std::string>& texts, const Tokenizer& tok, int max_length) {
  std::vector<TrainSample> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    TrainSample s;
    s.index = int64_t(i);
    s.ids = tok.encode(texts[i]);
    if (int(s.ids.size()) > max_length) s.ids.resize(size_t(max_length));
    if (s.ids.size() < 2) continue;
    s.loss_mask.assign(s.ids.size(), 1);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {
// A list of integers in [0, limit) from one regenerated line (ids: limit = vocab; mask: 2).
template <typename T>
std::vector<T> int_list(const nlohmann::json& j, const char* key, int64_t limit, const std::string& where) {
  if (!j.contains(key)) fail("{}: missing '{}'", where, key);
  const nlohmann::json& v = j[key];
  if (!v.is_array()) fail("{}: '{}' must be a list of integers", where, key);
  std::vector<T> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t x;
    if (!json_int64(v[i], &x) || x < 0 || x >= limit)
      fail("{}: {}[{}] = {} is not an integer in [0, {})", where, key, i, json_brief(v[i]), limit);
    out.push_back(T(x));
  }
  return out;
}
}  // namespace

std::vector<TrainSample> load_regenerated(const std::string& path, int max_length, int vocab) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open", path);
  std::vector<TrainSample> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", path, n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      if (in.peek() == EOF) break;  // a line cut short by an interrupted run: regen redoes it
      fail("{}: bad JSON", where);
    }
    if (!j.is_object()) fail("{}: expected an object with input_ids and loss_mask", where);
    TrainSample s;
    s.index = n - 1;
    if (j.contains("index") && !json_int64(j["index"], &s.index)) fail("{}: 'index' must be an integer", where);
    s.ids = int_list<int>(j, "input_ids", vocab > 0 ? vocab : INT32_MAX, where);
    s.loss_mask = int_list<uint8_t>(j, "loss_mask", 2, where);
    EAGLET_CHECK(s.ids.size() == s.loss_mask.size(), "{}: input_ids ({}) and loss_mask ({}) differ in length", where,
                 s.ids.size(), s.loss_mask.size());
    if (int(s.ids.size()) > max_length) {
      s.ids.resize(size_t(max_length));
      s.loss_mask.resize(size_t(max_length));
    }
    if (s.ids.size() >= 2) out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.index < b.index; });
  return out;
}

}  // namespace eaglet
