#include "train/chat_data.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/json_config.h"
#include "io/mapped_file.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
// One record with where it came from ("file.jsonl:12" or "file.json[3]") for error messages.
struct Record {
  json value;
  std::string where;
};

std::vector<Record> records(const std::string& path, int limit, BadRecords* bad) {
  std::vector<Record> out;
  const std::string data = read_text_file(path);
  const bool jsonl = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  if (jsonl) {
    std::istringstream in(data);
    std::string line;
    int n = 0;
    while ((limit <= 0 || int(out.size()) < limit) && std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = fmt::format("{}:{}", path, n);
      per_record(bad, [&] {
        try {
          out.push_back({json::parse(line), where});
        } catch (const json::exception& e) {
          fail("{}: bad JSON: {}", where, e.what());
        }
      });
    }
    return out;
  }
  json j;
  try {
    j = json::parse(data);
  } catch (const json::exception& e) {
    fail("{}: bad JSON: {}", path, e.what());
  }
  if (!j.is_array()) fail("{}: expected a JSON array of conversations", path);
  for (size_t i = 0; i < j.size() && (limit <= 0 || int(out.size()) < limit); ++i)
    out.push_back({std::move(j[i]), fmt::format("{}[{}]", path, i)});
  return out;
}

// A string field of a turn: `role`/`from` or `content`/`value`.
std::string turn_field(const json& t, const char* key, const char* alt, const std::string& where) {
  const char* name = t.contains(key) ? key : alt;
  if (!t.contains(name)) fail("{}: needs '{}' (or '{}')", where, key, alt);
  if (!t[name].is_string()) fail("{}: '{}' must be a string (got {})", where, name, json_brief(t[name]));
  return t[name].get<std::string>();
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
    auto r = records(path, 1, nullptr);
    return !r.empty() && r[0].value.is_object() && (r[0].value.contains("conversations") || r[0].value.contains("messages"));
  } catch (const Error&) {
    return false;
  }
}

std::unique_ptr<ChatTemplate> chat_template_for(const std::string& data, const std::string& template_path,
                                                const Tokenizer& tok) {
  if (!template_path.empty()) return std::make_unique<ChatTemplate>(read_text_file(template_path));
  auto tmpl = ChatTemplate::from_tokenizer_config(tok.config());
  EAGLET_CHECK(tmpl != nullptr, "{}: chat data needs a chat template: the target's tokenizer_config.json has none; set "
               "data.chat_template to a Jinja file", data);
  return tmpl;
}

std::vector<Conversation> load_conversations(const std::string& path, int limit, BadRecords* bad) {
  std::vector<Conversation> out;
  auto recs = records(path, limit, bad);
  for (size_t i = 0; i < recs.size(); ++i) per_record(bad, [&] {
    const json& r = recs[i].value;
    const std::string& where = recs[i].where;
    const char* key = r.is_object() && r.contains("conversations") ? "conversations" : "messages";
    if (!r.is_object() || !r.contains(key)) fail("{}: record has no 'conversations' or 'messages' list", where);
    const json& turns = r[key];
    if (!turns.is_array()) fail("{}: '{}' must be a list of turns", where, key);
    Conversation c;
    c.index = int64_t(i);
    for (size_t k = 0; k < turns.size(); ++k) {
      const json& t = turns[k];
      const std::string turn = fmt::format("{}: {}[{}]", where, key, k);
      if (!t.is_object()) fail("{}: a turn must be an object", turn);
      const std::string role = normalise_role(turn_field(t, "role", "from", turn));
      const std::string content = turn_field(t, "content", "value", turn);
      if (role.empty()) fail("{}: empty role", turn);
      c.messages.push_back({role, content});
    }
    if (!c.messages.empty()) out.push_back(std::move(c));
  });
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
