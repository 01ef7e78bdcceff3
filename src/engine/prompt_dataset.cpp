#include "engine/prompt_dataset.h"

#include <unicode/utf8.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/mapped_file.h"

namespace eaglet {

namespace {
bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Text files are not checked by a JSON parser: a character cut by `head -c` would reach a request
// body and fail there (loadtest aborted on nlohmann's type_error 316).
void check_utf8(const std::string& s, const std::string& where) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const int32_t n = int32_t(std::min<size_t>(s.size(), INT32_MAX));
  for (int32_t i = 0; i < n;) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(p, i, n, c);
    if (c < 0) fail("{}: invalid UTF-8 at byte {} of the prompt", where, at);
  }
}

std::string prompt_of(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail("{}: expected a JSON object", where);
  for (const char* key : {"prompt", "text", "question", "instruction"})
    if (j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  if (j.contains("turns") && j["turns"].is_array() && !j["turns"].empty() && j["turns"][0].is_string())
    return j["turns"][0].get<std::string>();
  for (const char* key : {"messages", "conversations"}) {
    if (!j.contains(key) || !j[key].is_array()) continue;
    for (auto& m : j[key]) {
      if (!m.is_object()) fail("{}: each of '{}' must be an object", where, key);
      const nlohmann::json& role = m.contains("role") ? m["role"] : m.contains("from") ? m["from"] : nlohmann::json();
      const nlohmann::json& content = m.contains("content") ? m["content"] : m.contains("value") ? m["value"] : nlohmann::json();
      if (!role.is_string() || !content.is_string()) fail("{}: each of '{}' needs a string role and content", where, key);
      if (role == "user" || role == "human") return content.get<std::string>();
    }
  }
  fail("{}: record has none of prompt, text, question, turns, messages, conversations", where);
}
}  // namespace

std::vector<std::string> load_prompts(const std::string& path, int limit, BadRecords* bad) {
  const std::string data = read_text_file(path);
  std::vector<std::string> out;
  auto full = [&] { return limit >= 0 && int(out.size()) >= limit; };
  if (ends_with(path, ".jsonl")) {
    std::istringstream in(data);
    std::string line;
    int n = 0;
    while (!full() && std::getline(in, line)) {
      ++n;
      if (trim(line).empty()) continue;
      per_record(bad, [&] {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
          fail("{}:{}: bad JSON: {}", path, n, e.what());
        }
        out.push_back(prompt_of(j, path + ":" + std::to_string(n)));
      });
    }
  } else if (ends_with(path, ".json")) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(data);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: bad JSON: {}", path, e.what());
    }
    if (!j.is_array()) fail("{}: expected a JSON array of records", path);
    for (size_t i = 0; i < j.size() && !full(); ++i)
      per_record(bad, [&] { out.push_back(prompt_of(j[i], path + "[" + std::to_string(i) + "]")); });
  } else {
    const bool blocks = data.find("\n\n") != std::string::npos;
    std::istringstream in(data);
    std::string line, block;
    int n = 0, block_start = 1;
    auto add = [&](const std::string& text, int at) {
      per_record(bad, [&] {
        check_utf8(text, path + ":" + std::to_string(at));
        out.push_back(text);
      });
    };
    while (!full() && std::getline(in, line)) {
      ++n;
      if (!blocks) {
        if (!trim(line).empty()) add(trim(line), n);
        continue;
      }
      if (trim(line).empty()) {
        if (!trim(block).empty()) add(trim(block), block_start);
        block.clear();
      } else {
        if (block.empty()) block_start = n;
        block += (block.empty() ? "" : "\n") + line;
      }
    }
    if (!full() && !trim(block).empty()) add(trim(block), block_start);
  }
  if (out.empty()) fail("{}: no prompts found", path);
  return out;
}

}  // namespace eaglet
