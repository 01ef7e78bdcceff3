#include "train/chat_data.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/mapped_file.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
std::vector<json> records(const std::string& path, int limit) {
  std::vector<json> out;
  const std::string data = read_text_file(path);
  const bool jsonl = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  try {
    if (jsonl) {
      std::istringstream in(data);
      std::string line;
      while ((limit <= 0 || int(out.size()) < limit) && std::getline(in, line))
        if (line.find_first_not_of(" \t\r") != std::string::npos) out.push_back(json::parse(line));
    } else {
      json j = json::parse(data);
      if (!j.is_array()) fail("{}: expected a JSON array of conversations", path);
      for (auto& r : j) {
        if (limit > 0 && int(out.size()) >= limit) break;
        out.push_back(r);
      }
    }
  } catch (const json::exception& e) {
    fail("{}: bad JSON: {}", path, e.what());
  }
  return out;
}

std::string normalise_role(const std::string& r) {
  if (r == "human" || r == "user") return "user";
  if (r == "gpt" || r == "assistant" || r == "chatgpt" || r == "bard" || r == "model") return "assistant";
  if (r == "system") return "system";
  return r;
}
}  // namespace

bool is_chat_file(const std::string& path) {
  if (!(path.size() > 5 && (path.compare(path.size() - 5, 5, ".json") == 0 || path.compare(path.size() - 6, 6, ".jsonl") == 0)))
    return false;
  try {
    auto r = records(path, 1);
    return !r.empty() && r[0].is_object() && (r[0].contains("conversations") || r[0].contains("messages"));
  } catch (const Error&) {
    return false;
  }
}

std::vector<Conversation> load_conversations(const std::string& path, int limit) {
  std::vector<Conversation> out;
  auto recs = records(path, limit);
  for (size_t i = 0; i < recs.size(); ++i) {
    const json& r = recs[i];
    const json* turns = r.contains("conversations") ? &r["conversations"] : r.contains("messages") ? &r["messages"] : nullptr;
    if (!turns || !turns->is_array()) fail("{}: record {} has no 'conversations' or 'messages' list", path, i);
    Conversation c;
    c.index = int64_t(i);
    for (auto& t : *turns) {
      if (!t.is_object()) fail("{}: record {} has a turn that is not an object", path, i);
      const std::string role = normalise_role(t.value("role", t.value("from", "")));
      const json& content = t.contains("content") ? t["content"] : t.contains("value") ? t["value"] : json();
      if (role.empty() || !content.is_string()) fail("{}: record {} has a turn without role and text", path, i);
      c.messages.push_back({role, content.get<std::string>()});
    }
    if (!c.messages.empty()) out.push_back(std::move(c));
  }
  if (out.empty()) fail("{}: no conversations found", path);
  return out;
}

std::vector<int> render_prompt(const std::vector<ChatMessage>& msgs, size_t n, const ChatTemplate& tmpl, const Tokenizer& tok) {
  std::vector<ChatMessage> head(msgs.begin(), msgs.begin() + long(n));
  return tok.encode(tmpl.render(head, true, tok), 0, true);
}

TrainSample render_conversation(const Conversation& c, const ChatTemplate& tmpl, const Tokenizer& tok, int max_length) {
  TrainSample s;
  s.index = c.index;
  s.ids = tok.encode(tmpl.render(c.messages, false, tok), 0, true);
  s.loss_mask.assign(s.ids.size(), 0);
  for (size_t i = 0; i < c.messages.size(); ++i) {
    if (c.messages[i].role != "assistant") continue;
    const size_t begin = render_prompt(c.messages, i, tmpl, tok).size();
    std::vector<ChatMessage> upto(c.messages.begin(), c.messages.begin() + long(i) + 1);
    const size_t end = std::min(s.ids.size(), tok.encode(tmpl.render(upto, false, tok), 0, true).size());
    for (size_t t = begin; t < end; ++t) s.loss_mask[t] = 1;
  }
  if (int(s.ids.size()) > max_length) {
    s.ids.resize(size_t(max_length));
    s.loss_mask.resize(size_t(max_length));
  }
  return s;
}

}  // namespace eaglet
