// Chat training data: JSONL/JSON records with ShareGPT `conversations` (`from`/`value` or
// `role`/`content`) or OpenAI `messages`, rendered with the target's chat template. The loss
// mask covers the assistant turns only: the tokens between the rendering of the conversation up
// to a turn (with the generation prompt) and the rendering that includes it.
#pragma once
#include "core/bad_records.h"
#include <string>
#include <vector>

#include <memory>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/dataset.h"

namespace eaglet {

struct Conversation {
  int64_t index = 0;
  std::vector<ChatMessage> messages;
};

// True when the file's first record holds `conversations` or `messages`.
bool is_chat_file(const std::string& path);
// The template chat data `data` is rendered with: the Jinja file `template_path` (data.chat_template)
// when given, else the tokenizer's; an error naming `data` when there is neither.
std::unique_ptr<ChatTemplate> chat_template_for(const std::string& data, const std::string& template_path,
                                                const Tokenizer& tok);
// `bad`: malformed records are counted there and skipped (else they are errors).
std::vector<Conversation> load_conversations(const std::string& path, int limit, BadRecords* bad = nullptr);
// Token ids of the rendered conversation and its assistant-only loss mask.
TrainSample render_conversation(const Conversation& c, const ChatTemplate& tmpl, const Tokenizer& tok, int max_length);
// Renders messages [0, n) with the generation prompt: the prompt for assistant turn n.
std::vector<int> render_prompt(const std::vector<ChatMessage>& msgs, size_t n, const ChatTemplate& tmpl, const Tokenizer& tok);

}  // namespace eaglet
