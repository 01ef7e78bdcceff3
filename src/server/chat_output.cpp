#include "server/chat_output.h"

namespace eaglet {

using json = nlohmann::json;

ChatOutput::ChatOutput(const ReasoningFormat* reasoning, ReasoningStart start, std::unique_ptr<ToolCallParser> tools)
    : tools_(std::move(tools)) {
  if (reasoning) splitter_.emplace(*reasoning, start);
}

void ChatOutput::answer(std::string_view text, OutputDelta* out) {
  if (tools_) tools_->feed(text, out);
  else out->content += text;
}

OutputDelta ChatOutput::feed(std::string_view text) {
  OutputDelta d;
  answer(splitter_ ? splitter_->feed(text, &d) : std::string(text), &d);
  return d;
}

OutputDelta ChatOutput::finish() {
  OutputDelta d;
  if (splitter_) answer(splitter_->finish(&d), &d);
  if (tools_) tools_->finish(&d);
  return d;
}

json chat_delta_json(const OutputDelta& d) {
  json delta = json::object();
  if (!d.reasoning.empty()) delta["reasoning"] = delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (d.calls.empty()) return delta;
  json calls = json::array();
  for (const ToolCallDelta& c : d.calls) {
    if (!c.name.empty()) {
      calls.push_back({{"index", c.index}, {"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    } else if (!calls.empty() && calls.back()["index"] == c.index) {  // one entry per call and chunk
      calls.back()["function"]["arguments"] = calls.back()["function"]["arguments"].get<std::string>() + c.arguments;
    } else {
      calls.push_back({{"index", c.index}, {"function", {{"arguments", c.arguments}}}});
    }
  }
  delta["tool_calls"] = std::move(calls);
  return delta;
}

void ChatMessageBuilder::add(const OutputDelta& d) {
  content_ += d.content;
  reasoning_ += d.reasoning;
  for (const ToolCallDelta& c : d.calls) {
    if (!c.name.empty())
      calls_.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    else
      calls_[size_t(c.index)]["function"]["arguments"] = calls_[size_t(c.index)]["function"]["arguments"].get<std::string>() + c.arguments;
  }
}

json ChatMessageBuilder::message(bool reasoning_fields) const {
  // OpenAI's content is null for a message that only calls tools.
  json m = {{"role", "assistant"}, {"content", content_.empty() && !calls_.empty() ? json() : json(content_)}};
  if (!calls_.empty()) m["tool_calls"] = calls_;
  if (reasoning_fields) m["reasoning"] = m["reasoning_content"] = reasoning_.empty() ? json() : json(reasoning_);
  return m;
}

std::string chat_finish_reason(const std::string& finish, int tool_calls) {
  return finish == "stop" && tool_calls > 0 ? "tool_calls" : finish;
}

}  // namespace eaglet
