#include "train/dataset.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/prompt_dataset.h"

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

std::vector<TrainSample> load_regenerated(const std::string& path, int max_length) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open", path);
  std::vector<TrainSample> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      if (in.peek() == EOF) break;  // a line cut short by an interrupted run: regen redoes it
      fail("{}:{}: bad JSON", path, n);
    }
    TrainSample s;
    s.index = j.value("index", int64_t(n - 1));
    s.ids = j.at("input_ids").get<std::vector<int>>();
    s.loss_mask = j.at("loss_mask").get<std::vector<uint8_t>>();
    EAGLET_CHECK(s.ids.size() == s.loss_mask.size(), "{}:{}: input_ids and loss_mask differ in length", path, n);
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
