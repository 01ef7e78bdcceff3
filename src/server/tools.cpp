#include "server/tools.h"

#include <fmt/format.h>

#include "constrain/json_schema.h"
#include "core/error.h"
#include "server/openai_protocol.h"

namespace eaglet {

using ojson = nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw ApiError{400, msg, "invalid_request_error", param};
}

// OpenAI's rule for function names: what every tool-call format can carry unescaped.
bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

void parse_tool(const ojson& t, size_t i, ToolRequest* out) {
  const std::string p = fmt::format("tools[{}]", i);
  if (!t.is_object()) bad(p, p + " must be an object");
  if (!t.contains("type") || t["type"] != "function") bad(p + ".type", p + ".type must be \"function\" (the only tool type)");
  if (!t.contains("function") || !t["function"].is_object()) bad(p + ".function", p + ".function must be an object");
  const ojson& f = t["function"];
  for (auto& [k, v] : f.items())
    if (k != "name" && k != "description" && k != "parameters" && k != "strict")
      bad(p + ".function." + k, fmt::format("'{}.function.{}' is not a field of a function", p, k));
  if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>()))
    bad(p + ".function.name", p + ".function.name must be 1-64 characters of a-z, A-Z, 0-9, '_', '-' or '.'");
  const std::string name = f["name"];
  if (out->parameters.count(name)) bad(p + ".function.name", fmt::format("two tools are named '{}'", name));
  if (f.contains("description") && !f["description"].is_string()) bad(p + ".function.description", p + ".function.description must be a string");
  if (f.contains("strict") && !f["strict"].is_boolean() && !f["strict"].is_null())
    bad(p + ".function.strict", p + ".function.strict must be a boolean");
  const ojson params = f.contains("parameters") && !f["parameters"].is_null() ? f["parameters"] : ojson::object();
  if (!params.is_object()) bad(p + ".function.parameters", p + ".function.parameters must be a JSON schema (an object)");
  out->parameters[name] = params;
  out->tools.push_back(t);
}

void parse_choice(const ojson& c, ToolRequest* out) {
  if (c.is_string()) {
    const std::string s = c;
    if (s == "none") out->choice = ToolRequest::Choice::None;
    else if (s == "auto") out->choice = ToolRequest::Choice::Auto;
    else if (s == "required") out->choice = ToolRequest::Choice::Required;
    else bad("tool_choice", fmt::format("tool_choice '{}' is not one of none, auto, required", s));
    return;
  }
  if (!c.is_object() || c.value("type", "") != "function" || !c.contains("function") || !c["function"].is_object() ||
      !c["function"].contains("name") || !c["function"]["name"].is_string())
    bad("tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  out->choice = ToolRequest::Choice::Named;
  out->named = c["function"]["name"];
  if (!out->parameters.count(out->named))
    bad("tool_choice.function.name", fmt::format("tool_choice names '{}', which is not among the request's tools", out->named));
}

}  // namespace

ToolRequest parse_tools(const nlohmann::json& body, const ojson* ordered, bool auto_tools) {
  // Most requests have no tool fields: they cost no second reading of the body.
  if (!body.contains("tools") && !body.contains("tool_choice") && !body.contains("parallel_tool_calls")) return {};
  const ojson b = ordered ? *ordered : ojson::parse(body.dump());
  ToolRequest t;
  const bool has_tools = b.contains("tools") && !b["tools"].is_null();
  if (has_tools) {
    if (!b["tools"].is_array()) bad("tools", "'tools' must be a list");
    if (b["tools"].size() > 128) bad("tools", "at most 128 tools");
    for (size_t i = 0; i < b["tools"].size(); ++i) parse_tool(b["tools"][i], i, &t);
  }
  // OpenAI's default: "auto" when tools are given, "none" otherwise.
  t.choice = t.any() ? ToolRequest::Choice::Auto : ToolRequest::Choice::None;
  if (b.contains("tool_choice") && !b["tool_choice"].is_null()) {
    parse_choice(b["tool_choice"], &t);
    if (t.choice != ToolRequest::Choice::None && !t.any()) bad("tool_choice", "tool_choice needs 'tools'");
  }
  if (b.contains("parallel_tool_calls") && !b["parallel_tool_calls"].is_null()) {
    if (!b["parallel_tool_calls"].is_boolean()) bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    t.parallel = b["parallel_tool_calls"];
  }
  if (t.choice == ToolRequest::Choice::Auto && !auto_tools)
    bad("tool_choice", "\"auto\" tool choice (the default when tools are given) needs the server started with "
                       "--enable-auto-tool-choice and --tool-call-parser; or send tool_choice \"required\", a named "
                       "function, or \"none\"");
  return t;
}

std::string forced_tool_gbnf(const ToolRequest& t) {
  auto schema_gbnf = [](const ojson& schema, const std::string& param) {
    try {
      return constrain::json_schema_to_gbnf(schema, true);
    } catch (const Error& e) {
      bad(param, param + ": " + e.what());
    }
  };
  if (t.choice == ToolRequest::Choice::Named) {
    for (size_t i = 0; i < t.tools.size(); ++i)
      if (t.tools[i]["function"]["name"] == t.named)
        return schema_gbnf(t.parameters.at(t.named), fmt::format("tools[{}].function.parameters", i));
  }
  // Required: [{"name": "f", "parameters": {...}}, ...], each element one of the tools. Every
  // tool's schema is checked for the error message's sake before they are joined.
  ojson any_of = ojson::array();
  for (size_t i = 0; i < t.tools.size(); ++i) {
    const std::string name = t.tools[i]["function"]["name"];
    schema_gbnf(t.parameters.at(name), fmt::format("tools[{}].function.parameters", i));
    any_of.push_back({{"type", "object"},
                      {"properties", {{"name", {{"const", name}}}, {"parameters", t.parameters.at(name)}}},
                      {"required", {"name", "parameters"}}});
  }
  ojson list = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any_of}}}};
  if (!t.parallel) list["maxItems"] = 1;
  return schema_gbnf(list, "tools");
}

ojson template_tool_calls(const ojson& calls, const std::string& param) {
  if (!calls.is_array()) bad(param, param + " must be a list");
  ojson out = ojson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const ojson& c = calls[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      bad(p, p + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    const ojson& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) bad(p + ".function.name", p + ".function.name must be a string");
    ojson call = c;
    if (f.contains("arguments") && f["arguments"].is_string()) {
      ojson args = ojson::parse(f["arguments"].get<std::string>(), nullptr, false);
      if (!args.is_discarded() && args.is_object()) call["function"]["arguments"] = std::move(args);
    } else if (!f.contains("arguments") || !f["arguments"].is_object()) {
      bad(p + ".function.arguments", p + ".function.arguments must be a string of JSON");
    }
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace eaglet
