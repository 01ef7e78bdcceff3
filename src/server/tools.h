// Tool calling, request side: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`, checked
// (a 400 names the field at fault), and the grammar that enforces `tool_choice` "required" or a
// named function through the constraint engine, as vLLM does: "required" makes the model write a
// JSON list of {"name", "parameters"} objects (one element when parallel_tool_calls is false),
// a named function makes it write that function's arguments. "auto" leaves the text free and the
// server's --tool-call-parser finds the calls in it (server/tool_parser.h).
#pragma once
#include <nlohmann/json.hpp>
#include <map>
#include <string>

namespace eaglet {

struct ToolRequest {
  enum class Choice { None, Auto, Required, Named };
  // The tools as the client sent them (key order kept: templates print them with tojson).
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  // Each function's parameters schema (an empty object when it gives none), by name.
  std::map<std::string, nlohmann::ordered_json> parameters;
  Choice choice = Choice::None;
  std::string named;        // Choice::Named: the function
  bool parallel = true;     // parallel_tool_calls
  bool any() const { return !tools.empty(); }
  // "required" or a named function: the output is held to forced_tool_gbnf.
  bool forced() const { return choice == Choice::Required || choice == Choice::Named; }
};

// The request's tool fields. `ordered`: the body with its key order (null: `body`'s, sorted).
// `auto_tools`: the server runs with --enable-auto-tool-choice and a --tool-call-parser; without
// them "auto" (also the default when tools are given) is a 400 saying so. Throws ApiError.
ToolRequest parse_tools(const nlohmann::json& body, const nlohmann::ordered_json* ordered, bool auto_tools);

// GBNF making the output the calls `t` requires (Choice::Required or Named); throws ApiError
// naming the tool's parameters when its schema cannot be enforced.
std::string forced_tool_gbnf(const ToolRequest& t);

// An assistant message's tool_calls with each `arguments` string parsed into an object, as chat
// templates expect (MiniMax's iterate over them; vLLM does the same); strings that are not JSON
// objects stay strings. Throws ApiError naming `param` when a call is malformed.
nlohmann::ordered_json template_tool_calls(const nlohmann::ordered_json& calls, const std::string& param);

}  // namespace eaglet
