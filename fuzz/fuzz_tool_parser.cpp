// Model output through every tool-call parser and reasoning splitter: any bytes, split anywhere,
// settle into the same reasoning, content and calls as the whole text does (the first byte picks
// the split points), and nothing else escapes.
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_input.h"
#include "server/chat_output.h"

namespace {
struct Out {
  std::string reasoning, content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator!=(const Out& o) const { return reasoning != o.reasoning || content != o.content || calls != o.calls; }
};

Out run(eaglet::ChatOutput out, const std::string& text, size_t step) {
  Out o;
  auto take = [&](const eaglet::OutputDelta& d) {
    o.reasoning += d.reasoning;
    o.content += d.content;
    for (const auto& c : d.calls) {
      if (!c.name.empty()) {
        if (c.index != int(o.calls.size())) std::abort();  // calls are numbered in order
        o.calls.emplace_back(c.name, "");
      }
      if (c.index < 0 || c.index >= int(o.calls.size())) std::abort();  // arguments of a call that was named
      o.calls[size_t(c.index)].second += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += step) take(out.feed(text.substr(i, step)));
  take(out.finish());
  return o;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = 1 + data[0] % 7;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const eaglet::ToolRequest tools = [] {
    eaglet::ToolRequest t;
    t.parameters["f"] = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array"}}})");
    return t;
  }();
  const eaglet::ReasoningFormat* formats[] = {nullptr, &eaglet::reasoning_format("qwen3"), &eaglet::reasoning_format("deepseek_r1")};
  for (const std::string& name : eaglet::tool_call_parser_names()) {
    for (const auto* f : formats) {
      for (auto start : {eaglet::ReasoningStart::Open, eaglet::ReasoningStart::Inside}) {
        auto make = [&] { return eaglet::ChatOutput(f, start, eaglet::make_tool_call_parser(name, tools, "c")); };
        if (run(make(), text, text.size() + 1) != run(make(), text, step)) std::abort();
      }
    }
  }
  return 0;
}
