// Tool calling, response side: parsers that find the tool calls in a model's output as it streams
// (vLLM's --tool-call-parser). Each choice of a request has its own parser; text goes in piece by
// piece and comes out settled: content, and tool calls in OpenAI's streaming shape (a call's
// first delta carries its id and name, later ones fragments of its arguments). Text that could
// still turn out to be a marker is held back until the next piece says; a tool-call block that
// does not parse comes out as content, as vLLM's parsers do.
//
// Formats (vLLM's names):
// - hermes (Qwen2.5, Qwen3, Hermes): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`;
// - llama3_json (Llama 3.1-3.3): the output is `{"name": ..., "parameters": {...}}` objects
//   separated by `;`, optionally after `<|python_tag|>`; text that does not start so is content;
// - minimax_m2: `<minimax:tool_call><invoke name="f"><parameter name="k">v</parameter>...
//   </invoke>...</minimax:tool_call>`, values typed by the tool's schema;
// - minimax_m3: `]<]minimax[>[<tool_call>`, `]<]minimax[>[<invoke name="f">`, then parameters as
//   elements `]<]minimax[>[<k>v]<]minimax[>[</k>` whose nested elements are objects and `<item>`
//   lists (the published MiniMax-M3 chat template's to_xml), values typed by the schema;
// - qwen3_coder (Qwen3-Coder): `<tool_call>\n<function=f>\n<parameter=k>\nv\n</parameter>\n
//   </function>\n</tool_call>`, values typed by the schema (untyped ones stay strings).
// Arguments stream as the model writes them for the JSON formats; the XML formats settle a call's
// arguments when its </invoke> arrives (their values are typed only once whole).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tools.h"

namespace eaglet {

struct ToolCallDelta {
  int index = 0;
  std::string id, name;  // on a call's first delta only
  std::string arguments;
};

// What a piece of output settles into.
struct OutputDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  void append(OutputDelta&& o) {
    reasoning += o.reasoning;
    content += o.content;
    for (auto& c : o.calls) calls.push_back(std::move(c));
  }
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // The next piece of output; what it settles is appended to `out`.
  virtual void feed(std::string_view text, OutputDelta* out) = 0;
  // The output ended (stop, length or abort): whatever was held back is settled.
  virtual void finish(OutputDelta* out) = 0;
  // Calls found so far (finish_reason becomes "tool_calls" when there are any).
  int calls() const { return next_; }

 protected:
  // `id_base`: a prefix unique to the choice; call i gets id `id_base` + i.
  explicit ToolCallParser(std::string id_base) : id_base_(std::move(id_base)) {}
  int begin_call(const std::string& name, OutputDelta* out);
  static void arguments(int index, std::string_view text, OutputDelta* out);

 private:
  std::string id_base_;
  int next_ = 0;
};

// vLLM's parser names eaglet has: hermes, llama3_json, minimax_m2, minimax_m3, qwen3_coder.
const std::vector<std::string>& tool_call_parser_names();
// Throws eaglet::Error for an unknown name (listing the known ones). `tools` must outlive it.
std::unique_ptr<ToolCallParser> make_tool_call_parser(const std::string& name, const ToolRequest& tools, std::string id_base);
// The output of forced_tool_gbnf (tool_choice "required" or a named function), whatever the
// server's parser: a JSON list of {"name", "parameters"}, or the named function's arguments.
std::unique_ptr<ToolCallParser> make_forced_tool_call_parser(const ToolRequest& tools, std::string id_base);

// The length of the longest end of `text` that is a proper beginning of `marker`: what a
// streaming parser holds back until the next piece shows whether the marker follows.
size_t marker_prefix_at_end(std::string_view text, std::string_view marker);

}  // namespace eaglet
