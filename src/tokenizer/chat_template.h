// Chat templates (`chat_template` in tokenizer_config.json) rendered with the Jinja subset real
// templates use: set (incl. namespace attributes), for (loop.*), if/elif/else, expressions with
// filters (trim, length, tojson, ...), tests (defined, none, string, ...), string methods
// (startswith, split, strip, ...), slices, and Hugging Face's trim_blocks/lstrip_blocks.
// Shared by the trainer (chat data) and the server (/v1/chat/completions).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/jinja.h"

namespace eaglet {

class Tokenizer;

struct ChatMessage {
  std::string role, content;
  // Further keys of the message as the template sees them: an assistant's tool_calls and
  // reasoning_content, a tool message's tool_call_id and name.
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& source);  // throws eaglet::Error on syntax errors
  ~ChatTemplate();
  // The template of a tokenizer_config.json (string, or the "default" of a named list); null if none.
  static std::unique_ptr<ChatTemplate> from_tokenizer_config(const nlohmann::json& config);
  // Renders with `messages`, `add_generation_prompt`, `bos_token`, `eos_token` and `extra` vars.
  std::string render(const nlohmann::json& context, const jinja::RenderLimits& limits = {}) const;
  // `extra`: more variables (a request's chat_template_kwargs, e.g. Qwen3's enable_thinking, and
  // its `tools`; key order kept, as templates print them with tojson).
  // `limits`: a deadline and a cancel flag beyond the fixed size and work limits.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Tokenizer& tok,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object(),
                     const jinja::RenderLimits& limits = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace eaglet
