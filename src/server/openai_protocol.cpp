#include "server/openai_protocol.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/error.h"
#include "io/json_config.h"
#include "io/mapped_file.h"
#include "server/structured_output.h"

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

// The fields each endpoint honours; anything else is refused by name rather than ignored.
const std::set<std::string> kCommon = {"model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options",
                                       "stop", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
                                       "seed", "top_k", "min_p", "ignore_eos", "logprobs",
                                       // no-ops by definition: they label the request, never change the output
                                       "user", "metadata", "store", "service_tier"};
const std::set<std::string> kCompletion = {"prompt", "echo", "best_of", "suffix"};
const std::set<std::string> kChat = {"messages", "max_completion_tokens", "top_logprobs",
                                     "chat_template_kwargs", "add_generation_prompt", "tools", "tool_choice",
                                     "parallel_tool_calls", "modalities"};

void check_fields(const json& b, bool chat) {
  for (auto& [k, v] : b.items()) {
    if (kCommon.count(k) || (chat ? kChat : kCompletion).count(k) || structured_output_fields().count(k)) continue;
    bad(k, fmt::format("'{}' is not supported by eaglet's {} endpoint", k, chat ? "/v1/chat/completions" : "/v1/completions"));
  }
  if (!chat) {
    if (const json* sfx = field(b, "suffix"); sfx && !(sfx->is_string() && sfx->get<std::string>().empty()))
      bad("suffix", "'suffix' (insertion) is not supported");
    return;
  }
  if (const json* m = field(b, "modalities"); m && *m != json::array({"text"}))
    bad("modalities", "only the 'text' modality is supported");
}

ApiRequest::Prompt prompt_of(const json& p, const std::string& param) {
  ApiRequest::Prompt out;
  if (p.is_string()) {
    out.text = p.get<std::string>();
    return out;
  }
  if (!p.is_array() || p.empty()) bad(param, "a prompt must be a string or a non-empty list of token ids");
  out.is_ids = true;
  for (auto& t : p) {
    int64_t id;
    // Wider than int on purpose: 4294967296 must be refused, not wrapped to token 0.
    if (!json_int64(t, &id)) bad(param, fmt::format("token ids must be integers (got {})", json_brief(t)));
    out.ids.push_back(id);
  }
  return out;
}
}  // namespace

namespace {
// What a message carries besides role and content, for the template: an assistant's tool_calls
// (arguments parsed into objects) and reasoning, a tool message's tool_call_id, any name.
nlohmann::ordered_json message_fields(const json& m, const std::string& role, const std::string& p) {
  nlohmann::ordered_json f = nlohmann::ordered_json::object();
  auto text = [&](const char* key) -> const json* {
    const json* v = field(m, key);
    if (v && !v->is_string()) bad(p + "." + key, fmt::format("{}.{} must be a string", p, key));
    return v;
  };
  if (const json* n = text("name")) f["name"] = *n;
  if (role == "assistant") {
    if (const json* c = field(m, "tool_calls")) f["tool_calls"] = template_tool_calls(nlohmann::ordered_json(*c), p + ".tool_calls");
    for (const char* key : {"reasoning_content", "reasoning"})
      if (const json* v = text(key)) f["reasoning_content"] = *v;
  }
  if (role == "tool")
    if (const json* id = text("tool_call_id")) f["tool_call_id"] = *id;
  return f;
}

// /v1/chat/completions' own fields: the messages, and the chat form of max_tokens and logprobs.
void parse_chat_fields(const json& b, ApiRequest& r) {
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
    r.messages.push_back({role == "developer" ? "system" : role, content_text(m.value("content", json()), p + ".content"),
                          message_fields(m, role, p)});
  }
  r.max_tokens = int(integer(b, "max_completion_tokens", 1, 1 << 30, integer(b, "max_tokens", 1, 1 << 30, -1)));
  if (boolean(b, "logprobs", false)) r.logprobs = int(integer(b, "top_logprobs", 0, 20, 0));
  if (const json* k = field(b, "chat_template_kwargs")) {
    if (!k->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.chat_template_kwargs = *k;
  }
  r.add_generation_prompt = boolean(b, "add_generation_prompt", true);
}

// /v1/completions' own fields: the prompt (a string, token ids, or a batch: a list of strings or
// of token-id lists), echo, and the completions form of max_tokens and logprobs.
void parse_completion_fields(const json& b, ApiRequest& r) {
  const json* p = field(b, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
    if (p->size() > 64) bad("prompt", "at most 64 prompts per request");
    for (size_t i = 0; i < p->size(); ++i) r.prompts.push_back(prompt_of((*p)[i], fmt::format("prompt[{}]", i)));
  } else {
    r.prompts.push_back(prompt_of(*p, "prompt"));
  }
  r.echo = boolean(b, "echo", false);
  // max_tokens 0 only makes sense with echo: scoring the prompt (lm-evaluation-harness).
  r.max_tokens = int(integer(b, "max_tokens", r.echo ? 0 : 1, 1 << 30, 16));  // the completions API's default is 16
  if (const json* lp = field(b, "logprobs")) {
    if (!lp->is_number_integer()) bad("logprobs", "'logprobs' must be an integer");
    r.logprobs = int(integer(b, "logprobs", 0, 20, 0));
  }
}

// {"token id": bias in [-100, 100]}; ids are checked against the vocabulary later.
void parse_logit_bias(const json& lb, SamplingParams& sp) {
  if (!lb.is_object()) bad("logit_bias", "'logit_bias' must be an object mapping token ids to biases");
  if (lb.size() > 1024) bad("logit_bias", "at most 1024 logit_bias entries");
  for (auto& [k, v] : lb.items()) {
    int id = -1;
    size_t used = 0;
    try {
      id = std::stoi(k, &used);
    } catch (const std::exception&) {
    }
    if (used != k.size() || id < 0) bad("logit_bias", fmt::format("logit_bias key '{}' is not a token id", k));
    if (!v.is_number() || !(v.get<double>() >= -100 && v.get<double>() <= 100))
      bad("logit_bias", fmt::format("logit_bias['{}'] must be a number in [-100, 100]", k));
    sp.logit_bias.emplace_back(id, v.get<float>());
  }
}

// The sampling fields, with the server's defaults (generation_config.json) where absent.
void parse_sampling(const json& b, const SamplingDefaults& d, ApiRequest& r) {
  r.sampling.temperature = float(number(b, "temperature", 0, 100, d.temperature));
  r.sampling.top_p = float(number(b, "top_p", 1e-9, 1, d.top_p));
  const int64_t top_k = integer(b, "top_k", -1, 1 << 30, d.top_k);
  r.sampling.top_k = top_k < 0 ? 0 : int(top_k);
  r.sampling.min_p = float(number(b, "min_p", 0, 1, d.min_p));
  r.sampling.presence_penalty = float(number(b, "presence_penalty", -2, 2, 0.0));
  r.sampling.frequency_penalty = float(number(b, "frequency_penalty", -2, 2, 0.0));
  r.sampling.repetition_penalty = float(number(b, "repetition_penalty", 1e-6, 2, d.repetition_penalty));
  if (const json* lb = field(b, "logit_bias")) parse_logit_bias(*lb, r.sampling);
  if (field(b, "seed")) {
    r.sampling.seed = uint64_t(integer(b, "seed", INT64_MIN, INT64_MAX, 0));
    r.seed_given = true;
  }
}

void parse_stop(const json& s, std::vector<std::string>& stop) {
  if (s.is_string()) stop = {s.get<std::string>()};
  else if (s.is_array()) {
    for (auto& x : s) {
      if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
      stop.push_back(x.get<std::string>());
    }
  } else {
    bad("stop", "'stop' must be a string or a list of strings");
  }
  if (stop.size() > 16) bad("stop", "at most 16 stop strings");
  for (auto& st : stop)  // matched after every token: keep that cheap
    if (st.size() > kMaxStopBytes) bad("stop", fmt::format("a stop string may be at most {} bytes", kMaxStopBytes));
}
}  // namespace

ApiRequest parse_request(const json& b, bool chat, const SamplingDefaults& d, const nlohmann::ordered_json* ordered, bool auto_tools) {
  if (!b.is_object()) bad("", "request body must be a JSON object");
  check_fields(b, chat);
  ApiRequest r;
  r.chat = chat;
  if (const json* m = field(b, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (chat) parse_chat_fields(b, r);
  else parse_completion_fields(b, r);
  parse_sampling(b, d, r);
  if (const json* s = field(b, "stop")) parse_stop(*s, r.stop);
  r.n = int(integer(b, "n", 1, 16, 1));
  r.stream = boolean(b, "stream", false);
  if (const json* so = field(b, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  r.ignore_eos = boolean(b, "ignore_eos", false);
  if (field(b, "best_of") && integer(b, "best_of", 1, 16, 1) != r.n) bad("best_of", "'best_of' other than n is not supported");
  r.structured = structured_output(b, ordered);
  if (chat) r.tools = parse_tools(b, ordered, auto_tools);
  if (r.structured && r.tools.forced())
    bad(r.structured->param, fmt::format("'{}' and tool_choice {} both constrain the output; give one", r.structured->param,
                                         r.tools.choice == ToolRequest::Choice::Required ? "\"required\"" : "naming a function"));
  return r;
}

SamplingDefaults sampling_defaults_for(const std::string& mode, const std::string& model_dir) {
  SamplingDefaults d;
  if (mode == "vllm") return d;
  const std::string dir = mode == "auto" ? model_dir : mode;
  const std::string path = dir + "/generation_config.json";
  if (dir.empty() || !file_exists(path)) {
    if (mode != "auto") fail("--generation-config: {} does not exist", path);
    return d;
  }
  const JsonConfig g = JsonConfig::load(path);
  d.temperature = g.get_double("temperature", d.temperature);
  d.top_p = g.get_double("top_p", d.top_p);
  d.top_k = int(g.get_int_in("top_k", d.top_k, 0, 1 << 30));
  d.min_p = g.get_double("min_p", d.min_p);
  d.repetition_penalty = g.get_double("repetition_penalty", d.repetition_penalty);
  if (!(d.temperature >= 0 && d.temperature <= 100)) fail("{}: temperature {} is outside [0, 100]", path, d.temperature);
  if (!(d.top_p > 0 && d.top_p <= 1)) fail("{}: top_p {} is outside (0, 1]", path, d.top_p);
  if (!(d.min_p >= 0 && d.min_p <= 1)) fail("{}: min_p {} is outside [0, 1]", path, d.min_p);
  if (!(d.repetition_penalty > 0 && d.repetition_penalty <= 2)) fail("{}: repetition_penalty {} is outside (0, 2]", path, d.repetition_penalty);
  return d;
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
    tops.push_back(std::isnan(d.logprobs[i]) ? json() : t);  // an echoed prompt's first token: no score (null)
    offs.push_back(text_offset);
    text_offset += texts[i].size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

namespace {
// OpenAI's "bytes": the token's UTF-8 bytes as integers (a token may hold part of a character,
// which its "token" text cannot show).
json utf8_bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(int(c));
  return out;
}
}  // namespace

json chat_logprobs_json(const ChoiceDelta& d, const std::vector<std::string>& texts) {
  json content = json::array();
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    json top = json::array();
    for (auto& [s, lp] : d.top[i]) top.push_back({{"token", s}, {"logprob", lp}, {"bytes", utf8_bytes(s)}});
    content.push_back({{"token", texts[i]}, {"logprob", d.logprobs[i]}, {"bytes", utf8_bytes(texts[i])}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

}  // namespace eaglet
