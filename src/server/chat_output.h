// One chat choice's output as the API returns it: the reasoning (--reasoning-parser), the answer,
// and the tool calls in it (--tool-call-parser, or the forced format of tool_choice "required" /
// a named function), split as the text streams; and the JSON of a streamed delta and of the
// whole message in OpenAI's shape (vLLM's `reasoning` and `reasoning_content` both).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/reasoning.h"
#include "server/tool_parser.h"

namespace eaglet {

class ChatOutput {
 public:
  // `reasoning`: null without a reasoning parser; `tools`: null when tool calls are not parsed.
  ChatOutput(const ReasoningFormat* reasoning, ReasoningStart start, std::unique_ptr<ToolCallParser> tools);
  OutputDelta feed(std::string_view text);
  OutputDelta finish();
  int tool_calls() const { return tools_ ? tools_->calls() : 0; }
  bool reasoning() const { return splitter_.has_value(); }

 private:
  void answer(std::string_view text, OutputDelta* out);
  std::optional<ReasoningSplitter> splitter_;
  std::unique_ptr<ToolCallParser> tools_;
};

// The `delta` of a stream chunk (content, reasoning, tool_calls: a call's first fragment with
// its id, type and name, later ones with its index and arguments only).
nlohmann::json chat_delta_json(const OutputDelta& d);

// A whole message, gathered from its deltas.
class ChatMessageBuilder {
 public:
  void add(const OutputDelta& d);
  // `reasoning_fields`: the response carries reasoning / reasoning_content (null when none).
  nlohmann::json message(bool reasoning_fields) const;
  bool has_tool_calls() const { return !calls_.empty(); }

 private:
  std::string content_, reasoning_;
  nlohmann::json calls_ = nlohmann::json::array();
};

// OpenAI's finish_reason "tool_calls" for an output that ended by itself after calling tools.
std::string chat_finish_reason(const std::string& finish, int tool_calls);

}  // namespace eaglet
