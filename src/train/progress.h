// One progress line for long jobs: done/total, rate, ETA, plus whatever the job adds.
#pragma once
#include <chrono>
#include <string>

namespace eaglet {

class Progress {
 public:
  Progress(std::string what, int64_t total, int64_t already_done = 0);
  // Logs at most every `min_seconds` (and always for the final item).
  void update(int64_t done, const std::string& extra = "", double min_seconds = 2.0);
  double elapsed() const;

 private:
  std::string what_;
  int64_t total_, start_done_;
  std::chrono::steady_clock::time_point start_, last_;
};

std::string format_duration(double seconds);

}  // namespace eaglet
