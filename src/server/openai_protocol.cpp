#include "server/openai_protocol.h"

#include <fmt/format.h>

#include "io/json_config.h"

namespace eaglet {

using json = nlohmann::json;

namespace {
constexpr size_t kMaxStopBytes = 1024;

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError{400, msg, "invalid_request_error", param};
}

const json* field(const json& b, const char* name) {
  auto it = b.find(name);
  return it == b.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& b, const char* name, double lo, double hi, double fallback) {
  const json* v = field(b, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, fmt::format("'{}' must be a number", name));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) bad(name, fmt::format("'{}' must be between {} and {} (got {})", name, lo, hi, x));
  return x;
}

int64_t integer(const json& b, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const json* v = field(b, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) bad(name, fmt::format("'{}' must be an integer", name));
  int64_t x;
  if (!json_int64(*v, &x) || x < lo || x > hi)
    bad(name, fmt::format("'{}' must be between {} and {} (got {})", name, lo, hi, json_brief(*v)));
  return x;
}

bool boolean(const json& b, const char* name, bool fallback) {
  const json* v = field(b, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(name, fmt::format("'{}' must be a boolean", name));
  return v->get<bool>();
}

std::string content_text(const json& c, const std::string& param) {
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array()) {  // [{"type": "text", "text": ...}, ...]
    std::string s;
    for (size_t i = 0; i < c.size(); ++i) {
      const json& part = c[i];
      const std::string where = fmt::format("{}[{}]", param, i);
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        bad(where, where + " must be an object with a string 'type'");
      if (part["type"].get<std::string>() != "text")
        bad(where, fmt::format("content part type '{}' is not supported (only 'text')", part["type"].get<std::string>()));
      if (!part.contains("text") || !part["text"].is_string()) bad(where, where + " needs a string 'text'");
      s += part["text"].get<std::string>();
    }
    return s;
  }
  if (c.is_null()) return "";
  bad(param, "message content must be a string or a list of text parts");
}
}  // namespace

ApiRequest parse_request(const json& b, bool chat) {
  if (!b.is_object()) bad("", "request body must be a JSON object");
  ApiRequest r;
  r.chat = chat;
  if (const json* m = field(b, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (chat) {
    const json* msgs = field(b, "messages");
    if (!msgs) bad("messages", "'messages' is required");
    if (!msgs->is_array() || msgs->empty()) bad("messages", "'messages' must be a non-empty list");
    for (size_t i = 0; i < msgs->size(); ++i) {
      const json& m = (*msgs)[i];
      const std::string p = fmt::format("messages[{}]", i);
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad(p, p + " needs a string 'role'");
      const std::string role = m["role"].get<std::string>();
      if (role != "system" && role != "user" && role != "assistant" && role != "developer" && role != "tool")
        bad(p + ".role", fmt::format("unknown role '{}'", role));
      r.messages.push_back({role == "developer" ? "system" : role, content_text(m.value("content", json()), p + ".content")});
    }
    r.max_tokens = int(integer(b, "max_completion_tokens", 1, 1 << 30, integer(b, "max_tokens", 1, 1 << 30, -1)));
    if (boolean(b, "logprobs", false)) r.logprobs = int(integer(b, "top_logprobs", 0, 20, 0));
  } else {
    const json* p = field(b, "prompt");
    if (!p) bad("prompt", "'prompt' is required");
    if (p->is_string()) {
      r.prompt_text = p->get<std::string>();
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
      r.prompt_text = (*p)[0].get<std::string>();
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
      for (auto& t : *p) {
        int64_t id;
        // Wider than int on purpose: 4294967296 must be refused, not wrapped to token 0.
        if (!json_int64(t, &id)) bad("prompt", fmt::format("token ids must be integers (got {})", json_brief(t)));
        r.prompt_ids.push_back(id);
      }
    } else {
      bad("prompt", "'prompt' must be a string, a list with one string, or a list of token ids");
    }
    r.max_tokens = int(integer(b, "max_tokens", 1, 1 << 30, 16));  // the completions API's default is 16
    if (const json* lp = field(b, "logprobs")) {
      if (!lp->is_number_integer()) bad("logprobs", "'logprobs' must be an integer");
      r.logprobs = int(integer(b, "logprobs", 0, 20, 0));
    }
    r.echo = boolean(b, "echo", false);
    if (r.echo) bad("echo", "'echo' is not supported");
  }
  r.sampling.temperature = float(number(b, "temperature", 0, 100, 1.0));
  r.sampling.top_p = float(number(b, "top_p", 1e-9, 1, 1.0));
  const int64_t top_k = integer(b, "top_k", -1, 1 << 30, 0);
  r.sampling.top_k = top_k < 0 ? 0 : int(top_k);
  r.sampling.min_p = float(number(b, "min_p", 0, 1, 0.0));
  if (field(b, "seed")) {
    r.sampling.seed = uint64_t(integer(b, "seed", INT64_MIN, INT64_MAX, 0));
    r.seed_given = true;
  }
  if (const json* s = field(b, "stop")) {
    if (s->is_string()) r.stop = {s->get<std::string>()};
    else if (s->is_array()) {
      for (auto& x : *s) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or a list of strings");
    }
    if (r.stop.size() > 16) bad("stop", "at most 16 stop strings");
    for (auto& st : r.stop)  // matched after every token: keep that cheap
      if (st.size() > kMaxStopBytes) bad("stop", fmt::format("a stop string may be at most {} bytes", kMaxStopBytes));
  }
  r.n = int(integer(b, "n", 1, 16, 1));
  r.stream = boolean(b, "stream", false);
  if (const json* so = field(b, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  r.ignore_eos = boolean(b, "ignore_eos", false);
  if (field(b, "best_of") && integer(b, "best_of", 1, 16, 1) != r.n) bad("best_of", "'best_of' other than n is not supported");
  return r;
}

json error_body(const ApiError& e) {
  return {{"error", {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json() : json(e.param)},
                     {"code", e.status}}}};
}

json usage_json(int prompt, int completion) {
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json completion_logprobs_json(const ChoiceDelta& d, const std::vector<std::string>& texts, size_t text_offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    tokens.push_back(texts[i]);
    lps.push_back(d.logprobs[i]);
    json t = json::object();
    for (auto& [s, lp] : d.top[i]) t[s] = lp;
    tops.push_back(t);
    offs.push_back(text_offset);
    text_offset += texts[i].size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json chat_logprobs_json(const ChoiceDelta& d, const std::vector<std::string>& texts) {
  json content = json::array();
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    json top = json::array();
    for (auto& [s, lp] : d.top[i]) top.push_back({{"token", s}, {"logprob", lp}, {"bytes", json::array()}});
    content.push_back({{"token", texts[i]}, {"logprob", d.logprobs[i]}, {"bytes", json::array()}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

}  // namespace eaglet
