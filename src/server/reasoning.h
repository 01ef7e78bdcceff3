// Reasoning, response side (vLLM's --reasoning-parser): the model's thinking between a start and
// an end marker goes to the `reasoning` field (and vLLM's older `reasoning_content`), the rest is
// the answer. Where the output begins is read off the rendered prompt: a prompt that ends with the
// start marker (DeepSeek-R1, MiniMax-M2, M3 with thinking on) puts the output inside the
// reasoning; one that ends with the end marker (Qwen3 with enable_thinking false, M3 with thinking
// off) outside it; otherwise the model may open with either marker (Qwen3, M3 adaptive), and
// formats whose models think without writing the start marker (deepseek_r1, minimax_m2) read
// unmarked output as reasoning until the end marker.
//
// A structured-output constraint applies to the answer only: the grammar is wrapped so that the
// reasoning is free text up to the first end marker (an automaton over the marker, so the text
// cannot contain it earlier), then at most 20 whitespace characters, then the requested grammar.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_parser.h"

namespace eaglet {

struct ReasoningFormat {
  std::string name, start, end;
  bool implicit_start = false;  // unmarked output is reasoning until the end marker
};

// deepseek_r1, qwen3, minimax_m2 (<think>...</think>), minimax_m3 (<mm:think>...</mm:think>).
const std::vector<std::string>& reasoning_parser_names();
// Throws eaglet::Error for an unknown name (listing the known ones).
const ReasoningFormat& reasoning_format(const std::string& name);

enum class ReasoningStart { Inside, Outside, Open };
ReasoningStart reasoning_start(const ReasoningFormat& f, std::string_view prompt);

// Splits one choice's output as it streams.
class ReasoningSplitter {
 public:
  ReasoningSplitter(const ReasoningFormat& f, ReasoningStart s);
  // Appends the reasoning in `text` to out->reasoning; returns the answer's part of it (held-back
  // text, a possible marker, comes out with a later piece).
  std::string feed(std::string_view text, OutputDelta* out);
  std::string finish(OutputDelta* out);

 private:
  enum class State { Open, Reasoning, AfterEnd, Answer };
  const ReasoningFormat& f_;
  State state_;
  std::string buf_;
};

// GBNF whose start rule `start_rule` is `gbnf`'s root after the reasoning. Outside: `gbnf`.
std::string after_reasoning_gbnf(const std::string& gbnf, const ReasoningFormat& f, ReasoningStart s,
                                 const std::string& start_rule);

}  // namespace eaglet
