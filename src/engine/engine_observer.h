// What the engine core reports as it runs, to whoever listens (the server's Prometheus metrics,
// runtime/serving_metrics.h): an interface here so the engine never depends on the layer above.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace eaglet {

// When a request passed each stage of its life, for the per-request latency histograms.
struct RequestTimes {
  using time_point = std::chrono::steady_clock::time_point;
  time_point arrival, scheduled, first_token, finished;
  bool has_first_token = false;  // a request aborted before its first token has no prefill/decode split
  int64_t prompt_tokens = 0, generation_tokens = 0;
};

// Called on the engine's thread, between and during steps; implementations must not block long.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void request_finished(const std::string& reason, const RequestTimes& t) = 0;
  virtual void tokens(int64_t prompt, int64_t generation) = 0;
  virtual void time_to_first_token(double seconds) = 0;
  virtual void inter_token_latency(double seconds) = 0;
  virtual void iteration(int64_t tokens) = 0;  // tokens one engine step ran through the target
  // One verified draft (chain or tree) of `drafted` tokens and `depth` levels.
  virtual void spec_step(int drafted, int accepted, int depth) = 0;
  // The draft version serving from now on.
  virtual void set_draft_version(int version) = 0;
  // A request under a grammar finished: the masks computed for it and their time, and the draft
  // tokens its grammar refused during verification.
  virtual void structured_output(int64_t masks, double mask_seconds, int64_t refused_drafts) {
    (void)masks, (void)mask_seconds, (void)refused_drafts;
  }
};

}  // namespace eaglet
