// The shared part of the tool-call formats that wrap calls in a block between two markers
// (hermes' <tool_call>, MiniMax's <minimax:tool_call>): text outside blocks is content (held back
// while it may be the start of the opening marker; whitespace after a call only when more text
// follows), and each block's body so far goes to the format, which emits calls as they settle.
// Internal to server/tool_parser*.cpp.
#pragma once
#include <string>

#include "server/tool_parser.h"

namespace eaglet {

class TaggedToolParser : public ToolCallParser {
 public:
  void feed(std::string_view text, OutputDelta* out) override;
  void finish(OutputDelta* out) override;

 protected:
  TaggedToolParser(std::string open, std::string close, std::string id_base)
      : ToolCallParser(std::move(id_base)), open_(std::move(open)), close_(std::move(close)) {}
  // A block has opened.
  virtual void begin_block() = 0;
  // The block's body so far; `closed`: all of it (its closing marker came, or the output ended).
  // Emits the calls it settles; returns false when a closed body holds no call it can read (the
  // block is then content, markers included; a body that streamed a call cannot go back).
  virtual bool body(std::string_view text, bool closed, OutputDelta* out) = 0;

 private:
  void content(std::string_view text, OutputDelta* out);
  const std::string open_, close_;
  std::string buf_;         // unsettled text: outside a block, a possible marker start; inside, the body
  std::string blank_;       // whitespace after a call, held until text other than a call follows
  bool in_block_ = false;
};

}  // namespace eaglet
