// The OpenAI API surface: request parsing and validation (errors name the parameter), and the
// JSON of responses, streaming chunks and error bodies, shaped so the official clients work.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/output_tracker.h"
#include "engine/sampler.h"
#include "tokenizer/chat_template.h"

namespace eaglet {

// An error that becomes an OpenAI error body with this HTTP status.
struct ApiError {
  int status = 400;
  std::string message, type = "invalid_request_error", param;
};

struct ApiRequest {
  bool chat = false;
  std::string model;
  std::string prompt_text;              // completions with a text prompt
  std::vector<int64_t> prompt_ids;      // completions with token ids (range-checked by the caller)
  std::vector<ChatMessage> messages;    // chat
  int max_tokens = -1;                  // -1: fill the context
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  int n = 1;
  bool stream = false, include_usage = false, ignore_eos = false, echo = false;
  int logprobs = -1;                    // -1 off; else number of alternatives
};

// Throws ApiError.
ApiRequest parse_request(const nlohmann::json& body, bool chat);
nlohmann::json error_body(const ApiError& e);

struct ChoiceDelta {
  int index = 0;
  std::string text;
  std::vector<int> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<std::string, float>>> top;  // alternatives, as text
  std::string finish_reason;  // empty while running
};

nlohmann::json usage_json(int prompt, int completion);
nlohmann::json completion_logprobs_json(const ChoiceDelta& d, const std::vector<std::string>& token_texts, size_t text_offset);
nlohmann::json chat_logprobs_json(const ChoiceDelta& d, const std::vector<std::string>& token_texts);

}  // namespace eaglet
