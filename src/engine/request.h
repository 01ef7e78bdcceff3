// A generation request as the scheduler sees it, with the callbacks through which its tokens and
// text stream back (called on the scheduler thread; they must not block).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/output_tracker.h"
#include "sampling/sampler.h"

namespace eaglet {

struct TokenLogprob {
  int token = -1;
  float logprob = 0;
  std::vector<std::pair<int, float>> top;  // most likely tokens at that position
};

struct Request {
  std::vector<int> prompt;
  SamplingParams sampling;
  StopConditions stop;
  int top_logprobs = -1;  // -1: no logprobs; 0..20: the chosen token's plus this many alternatives
  // Log-probabilities of prompt tokens 1..P-1 under the model (echo with logprobs: scoring, as
  // lm-evaluation-harness does): -1 off, else alternatives per position. Delivered once, through
  // on_prompt_logprobs, when the prompt has been prefilled; with stop.max_tokens == 0 the
  // request then finishes ("length") without generating.
  int prompt_logprobs = -1;
  std::function<void(std::vector<TokenLogprob> prompt_tokens)> on_prompt_logprobs;
  // New text (final, stop strings cut) and the tokens behind it since the last call.
  std::function<void(const std::string& text, const std::vector<TokenLogprob>& tokens)> on_output;
  std::function<void(const std::string& finish_reason, int completion_tokens)> on_finish;
  // Kept out of online training (`serve --online-train`): the X-Eaglet-No-Train header.
  bool no_capture = false;
  std::atomic<bool> cancelled{false};
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

}  // namespace eaglet
