#include "server/structured_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "constrain/json_schema.h"
#include "constrain/regex.h"
#include "constrain/structural_tag.h"
#include "core/error.h"
#include "server/openai_protocol.h"

namespace eaglet {

namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& param, const std::string& msg) {
  throw ApiError{400, msg, "invalid_request_error", param};
}

// A schema given as an object, or (vLLM accepts both) as a string of JSON.
ojson schema_value(const ojson& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    ojson s = ojson::parse(v.get<std::string>(), nullptr, false);
    if (s.is_discarded() || !(s.is_object() || s.is_boolean())) refuse(param, "'" + param + "' is not a JSON schema");
    return s;
  }
  refuse(param, "'" + param + "' must be a JSON schema (an object)");
}

std::string schema_gbnf(const ojson& schema, bool strict, const std::string& param) {
  try {
    return constrain::json_schema_to_gbnf(schema, strict);
  } catch (const Error& e) {
    refuse(param, param + ": " + e.what());
  }
}

std::string regex_gbnf(const ojson& v, const std::string& param) {
  if (!v.is_string()) refuse(param, "'" + param + "' must be a string (a regular expression)");
  try {
    return constrain::regex_to_gbnf(v.get<std::string>(), param);
  } catch (const Error& e) {
    refuse(param, e.what());
  }
}

std::string choice(const ojson& v, const std::string& param) {
  if (!v.is_array() || v.empty()) refuse(param, "'" + param + "' must be a non-empty list of strings");
  std::vector<std::string> c;
  for (const auto& s : v) {
    if (!s.is_string()) refuse(param, "'" + param + "' must be a non-empty list of strings");
    c.push_back(s.get<std::string>());
  }
  return constrain::choice_gbnf(c);
}

// vLLM passes a structural tag as a string of JSON; an object is taken too.
std::string structural_tag(const ojson& v, const std::string& param) {
  const ojson tag = v.is_string() ? ojson::parse(v.get<std::string>(), nullptr, false) : v;
  if (!tag.is_object()) refuse(param, "'" + param + "' must be a structural tag (an object, or a string of one)");
  try {
    return constrain::structural_tag_to_gbnf(tag);
  } catch (const Error& e) {
    refuse(param, param + ": " + e.what());
  }
}

std::string grammar_text(const ojson& v, const std::string& param) {
  if (!v.is_string() || v.get<std::string>().empty()) refuse(param, "'" + param + "' must be a GBNF grammar (a string)");
  return v.get<std::string>();
}

void response_format(const ojson& rf, std::vector<GrammarAsk>* asks) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    refuse("response_format", "'response_format' must be an object with a string 'type'");
  const std::string type = rf["type"];
  if (type == "text") return;
  if (type == "json_object") {
    asks->push_back({"response_format", constrain::json_object_gbnf()});
    return;
  }
  if (type == "structural_tag") {
    asks->push_back({"response_format", structural_tag(rf, "response_format")});
    return;
  }
  if (type != "json_schema")
    refuse("response_format",
           fmt::format("response_format type '{}' is not supported (text, json_object, json_schema, structural_tag)", type));
  const ojson* js = rf.contains("json_schema") ? &rf["json_schema"] : nullptr;
  if (!js || !js->is_object()) refuse("response_format.json_schema", "'response_format.json_schema' must be an object");
  for (const auto& [k, v] : js->items())
    if (k != "name" && k != "schema" && k != "strict" && k != "description")
      refuse("response_format.json_schema." + k, fmt::format("'response_format.json_schema.{}' is not supported", k));
  if (!js->contains("schema")) refuse("response_format.json_schema.schema", "'response_format.json_schema.schema' is required");
  const ojson& strict = js->contains("strict") ? (*js)["strict"] : ojson(nullptr);
  if (!strict.is_null() && !strict.is_boolean())
    refuse("response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean");
  const std::string param = "response_format.json_schema.schema";
  asks->push_back({param, schema_gbnf(schema_value((*js)["schema"], param), strict.is_boolean() ? strict.get<bool>() : true, param)});
}

// vLLM's structured_outputs object (and the same keys as top-level guided_* fields).
void vllm_field(const std::string& key, const ojson& v, const std::string& param, std::vector<GrammarAsk>* asks) {
  if (key == "json") asks->push_back({param, schema_gbnf(schema_value(v, param), true, param)});
  else if (key == "regex") asks->push_back({param, regex_gbnf(v, param)});
  else if (key == "choice") asks->push_back({param, choice(v, param)});
  else if (key == "grammar") asks->push_back({param, grammar_text(v, param)});
  else if (key == "structural_tag") asks->push_back({param, structural_tag(v, param)});
  else if (key == "json_object") {
    if (!v.is_boolean()) refuse(param, "'" + param + "' must be a boolean");
    if (v.get<bool>()) asks->push_back({param, constrain::json_object_gbnf()});
  } else {
    refuse(param, fmt::format("'{}' is not supported (json, regex, choice, grammar, json_object, structural_tag)", param));
  }
}

}  // namespace

const std::set<std::string>& structured_output_fields() {
  static const std::set<std::string> f = {"response_format", "structured_outputs", "guided_json", "guided_regex",
                                          "guided_choice", "guided_grammar", "grammar", "json_schema"};
  return f;
}

std::optional<GrammarAsk> structured_output(const nlohmann::json& body, const ojson* ordered) {
  // Most requests ask for no structure: they cost no second reading of the body.
  if (std::none_of(structured_output_fields().begin(), structured_output_fields().end(),
                   [&](const std::string& k) { return body.contains(k); }))
    return std::nullopt;
  const ojson b = ordered ? *ordered : ojson::parse(body.dump());
  std::vector<GrammarAsk> asks;
  if (b.contains("response_format")) response_format(b["response_format"], &asks);
  if (b.contains("structured_outputs")) {
    const ojson& so = b["structured_outputs"];
    if (!so.is_object()) refuse("structured_outputs", "'structured_outputs' must be an object");
    for (const auto& [k, v] : so.items()) vllm_field(k, v, "structured_outputs." + k, &asks);
  }
  for (const char* k : {"json", "regex", "choice", "grammar"})
    if (const std::string g = std::string("guided_") + k; b.contains(g)) vllm_field(k, b[g], g, &asks);
  if (b.contains("grammar")) asks.push_back({"grammar", grammar_text(b["grammar"], "grammar")});
  if (b.contains("json_schema")) asks.push_back({"json_schema", schema_gbnf(schema_value(b["json_schema"], "json_schema"), true, "json_schema")});
  if (asks.empty()) return std::nullopt;
  if (asks.size() > 1)
    refuse(asks[1].param, fmt::format("'{}' and '{}' both constrain the output; give one", asks[0].param, asks[1].param));
  compile_grammar(asks[0]);  // a grammar that does not parse is refused with the request
  return asks[0];
}

std::shared_ptr<const constrain::Grammar> compile_grammar(const GrammarAsk& ask, const std::string& start) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<const constrain::Grammar>> compiled;
  const auto key = std::make_pair(ask.gbnf, start);
  {
    std::lock_guard<std::mutex> lk(mu);
    if (auto it = compiled.find(key); it != compiled.end()) return it->second;
  }
  std::shared_ptr<const constrain::Grammar> g;
  try {
    g = constrain::Grammar::parse(ask.gbnf, ask.param, start);
  } catch (const Error& e) {
    refuse(ask.param, e.what());
  }
  std::lock_guard<std::mutex> lk(mu);
  if (compiled.size() >= 64) compiled.clear();
  compiled.emplace(key, g);
  return g;
}

}  // namespace eaglet
