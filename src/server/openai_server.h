// `eaglet serve`'s HTTP front: the OpenAI routes (/v1/completions, /v1/chat/completions,
// /v1/models), /health and /metrics, on cpp-httplib. It validates and tokenizes requests, hands
// them to the scheduler, and streams tokens back (SSE) or answers when they finish.
#pragma once
#include <memory>
#include <string>

#include "engine/model_bundle.h"
#include "runtime/scheduler.h"
#include "runtime/serving_metrics.h"
#include "tokenizer/chat_template.h"

namespace eaglet {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string served_model_name;
  size_t max_body_bytes = 4 << 20;
};

class OpenAiServer {
 public:
  OpenAiServer(ModelBundle& bundle, Scheduler& scheduler, ServingMetrics& metrics, ServerOptions opts);
  ~OpenAiServer();
  // Binds and serves until stop(); returns false when the address cannot be bound.
  bool listen();
  void stop();
  int bound_port() const { return bound_port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int bound_port_ = 0;
};

}  // namespace eaglet
