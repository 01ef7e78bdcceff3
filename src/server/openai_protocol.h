// The OpenAI API surface: request parsing and validation (errors name the parameter), and the
// JSON of responses, streaming chunks and error bodies, shaped so the official clients work.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/output_tracker.h"
#include "sampling/sampler.h"
#include "server/structured_output.h"
#include "server/tools.h"
#include "tokenizer/chat_template.h"

namespace eaglet {

// An error that becomes an OpenAI error body with this HTTP status.
struct ApiError {
  int status = 400;
  std::string message, type = "invalid_request_error", param;
};

struct ApiRequest {
  bool chat = false;
  bool no_train = false;  // the X-Eaglet-No-Train header: never captured for online training
  std::string model;
  struct Prompt {
    std::string text;           // a text prompt, or
    std::vector<int64_t> ids;   // token ids (range-checked by the caller)
    bool is_ids = false;
  };
  std::vector<Prompt> prompts;          // completions: one or more (n choices each)
  std::vector<ChatMessage> messages;    // chat
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
  bool add_generation_prompt = true;
  int max_tokens = -1;                  // -1: fill the context
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  int n = 1;
  bool stream = false, include_usage = false, ignore_eos = false, echo = false;
  int logprobs = -1;                    // -1 off; else number of alternatives
  std::optional<GrammarAsk> structured; // the output's constraint (the server compiles it)
  ToolRequest tools;                    // chat: tools, tool_choice, parallel_tool_calls
};

// Sampling defaults of requests that leave a field out: OpenAI's, or the model's
// generation_config.json (vLLM's --generation-config auto: temperature, top_p, top_k, min_p,
// repetition_penalty).
struct SamplingDefaults {
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0;
  int top_k = 0;
};
// `mode`: auto (model_dir's generation_config.json when present), vllm (OpenAI's), or a folder.
// Throws eaglet::Error naming the file and field at fault.
SamplingDefaults sampling_defaults_for(const std::string& mode, const std::string& model_dir);

// Throws ApiError. Every field of the OpenAI schema (and vLLM's extensions) is either honoured,
// a documented no-op that cannot change the output (user, metadata, store, service_tier), or a 400
// naming it; so is any other field.
// Structured-output fields become r.structured (server/structured_output.h), tool fields r.tools
// (server/tools.h; `auto_tools`: the server parses tool calls, so tool_choice "auto" is served);
// `ordered`: the body with its key order, which a JSON schema's properties and the tools follow.
ApiRequest parse_request(const nlohmann::json& body, bool chat, const SamplingDefaults& defaults = {},
                         const nlohmann::ordered_json* ordered = nullptr, bool auto_tools = false);
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
