// Follows one sequence's generated tokens: stop tokens, stop strings, max tokens, and the text
// produced so far (streamed without half characters, held back while it may still become a stop
// string). Shared by plain decoding, speculative decoding and the server.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace eaglet {

struct StopConditions {
  int max_tokens = 128;
  std::vector<int> stop_tokens;       // EOS ids etc.; the stop token is not part of the text
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
};

class OutputTracker {
 public:
  // `after_text`: the output follows decoded text (a prompt with a non-special token), so its
  // first token's leading space is kept.
  OutputTracker(const Tokenizer& tok, StopConditions stop, bool after_text = false);
  // Appends one token; returns false once the sequence is finished (further tokens are ignored).
  bool append(int token);
  bool finished() const { return !finish_reason_.empty(); }
  // Finishes with "stop" (the output is complete, as a structured-output grammar says); false.
  bool stop();
  const std::string& finish_reason() const { return finish_reason_; }  // "stop" | "length"
  const std::vector<int>& tokens() const { return tokens_; }
  const std::string& text() const { return text_; }
  // Text that became final since the last call (for streaming).
  std::string take_new_text();

 private:
  void finish(const std::string& reason);
  StopConditions stop_;
  StreamDecoder decoder_;
  std::vector<int> tokens_;
  std::string text_;       // confirmed text (stop strings cut)
  std::string held_;       // decoded text that might still be the start of a stop string
  size_t emitted_ = 0;
  std::string finish_reason_;
};

}  // namespace eaglet
