// A generation request as the scheduler sees it, with the callbacks through which its tokens and
// text stream back (called on the scheduler thread; they must not block).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/output_tracker.h"
#include "engine/sampler.h"

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
  // New text (final, stop strings cut) and the tokens behind it since the last call.
  std::function<void(const std::string& text, const std::vector<TokenLogprob>& tokens)> on_output;
  std::function<void(const std::string& finish_reason, int completion_tokens)> on_finish;
  std::atomic<bool> cancelled{false};
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

}  // namespace eaglet
