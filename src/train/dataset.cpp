#include "train/dataset.h"

#include <algorithm>
#include <glob.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/prompt_dataset.h"
#include "io/json_config.h"

namespace eaglet {

std::vector<std::string> load_texts(const std::string& path, int limit, BadRecords* bad) {
  return load_prompts(path, limit <= 0 ? -1 : limit, bad);
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

std::vector<TrainSample> load_regenerated(const std::string& path, int max_length, int vocab, BadRecords* bad) {
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
      per_record(bad, [&] { fail("{}: bad JSON", where); });
      continue;
    }
    per_record(bad, [&] {
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
    });
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.index < b.index; });
  return out;
}

bool is_regenerated_file(const std::string& path) {
  if (path.size() < 6 || path.compare(path.size() - 6, 6, ".jsonl") != 0) return false;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      return j.is_object() && j.contains("input_ids");
    }
  return false;
}

std::vector<std::string> expand_data_paths(const std::string& spec) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string part = spec.substr(start, comma - start);
    start = comma + 1;
    if (part.empty()) continue;
    if (part.find_first_of("*?[") == std::string::npos) {
      out.push_back(part);
      continue;
    }
    glob_t g{};
    const int rc = glob(part.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    globfree(&g);
    EAGLET_CHECK(rc == 0, "data: the pattern '{}' matches no file", part);
  }
  EAGLET_CHECK(!out.empty(), "data: no data file given ('{}')", spec);
  return out;
}

}  // namespace eaglet
