// `eaglet serve`'s OpenAI routes (/v1/completions, /v1/chat/completions, /v1/models), vLLM's
// /tokenize, /detokenize, /ping and /version, /health and /metrics over the HTTP layer (server/http_transport.h). A request is checked before any work
// (body size, JSON nesting, a lower bound on its prompt length), tokenized, handed to the
// scheduler, and answered from the scheduler's events: streamed as SSE chunks or collected into
// one response. A client that goes away cancels its sequences, streaming or not; shutdown drains
// for a bounded time and ends every remaining stream with an "abort" chunk and [DONE].
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/model_bundle.h"
#include "runtime/scheduler.h"
#include "runtime/serving_metrics.h"
#include "server/http_transport.h"
#include "server/openai_protocol.h"

namespace eaglet {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;          // required as "Authorization: Bearer KEY" when set (never empty when set)
  bool metrics_public = false;  // /metrics without the key
  std::string served_model_name;
  http::Limits limits;          // body and header size, deadlines, connections
  int max_json_depth = 64;      // nesting of the request body
  // Bytes one request's response may take (text, logprobs, the JSON around them); beyond it a
  // 400 naming the limit, or for a stream that has begun an error event, and the work stops.
  size_t max_response_bytes = 8 << 20;
  double chat_template_timeout_s = 2;  // one render of the chat template
  double drain_timeout_s = 10;  // on shutdown, how long running requests may still finish
  // --seed: requests without a seed draw from a stream seeded by it (reproducible runs, as vLLM's
  // --seed); unset: from std::random_device.
  std::optional<uint64_t> seed;
  // --chat-template: a template replacing the tokenizer's (file contents or the template itself).
  std::string chat_template;
  SamplingDefaults sampling_defaults;  // --generation-config
  // --enable-auto-tool-choice with --tool-call-parser (server/tool_parser.h): tool_choice "auto"
  // is served and calls are parsed out of the text. Forced tool choices work without them.
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;  // --reasoning-parser (server/reasoning.h); empty: none
  // POST /v1/draft/rollback (online training): rolls the draft back one version, answers its JSON.
  std::function<nlohmann::json()> rollback_draft;
};

class OpenAiServer {
 public:
  OpenAiServer(ModelBundle& bundle, Scheduler& scheduler, ServingMetrics& metrics, ServerOptions opts);
  ~OpenAiServer();
  // Binds and returns the port (throws eaglet::Error when the address cannot be bound).
  int bind();
  // Serves until shutdown() has finished.
  void run();
  // New requests get 503; running ones get drain_timeout_s to finish, then are aborted (their
  // streams end with finish_reason "abort" and [DONE]); then run() returns. Thread-safe.
  void shutdown();

  struct Impl;  // public only so the request objects in the .cpp can name it

 private:
  std::unique_ptr<Impl> impl_;
};

// Equal strings in time that depends only on `expected`'s length (API key checks).
bool constant_time_equal(const std::string& given, const std::string& expected);

}  // namespace eaglet
