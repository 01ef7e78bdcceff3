#include "train/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace eaglet {

std::string format_duration(double s) {
  if (s < 0 || s > 1e7) return "?";
  const int64_t t = int64_t(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

Progress::Progress(std::string what, int64_t total, int64_t already_done)
    : what_(std::move(what)), total_(total), start_done_(already_done), start_(std::chrono::steady_clock::now()), last_(start_) {}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done, const std::string& extra, double min_seconds) {
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && std::chrono::duration<double>(now - last_).count() < min_seconds) return;
  last_ = now;
  const double el = elapsed();
  const double rate = el > 0 ? double(done - start_done_) / el : 0;
  const double eta = rate > 0 ? double(total_ - done) / rate : -1;
  spdlog::info("{} {}/{} | {:.2f}/s | ETA {}{}{}", what_, done, total_, rate, format_duration(eta),
               extra.empty() ? "" : " | ", extra);
}

}  // namespace eaglet
