// The trainer's machine-readable record: metrics.jsonl (one JSON object per line: "train" lines
// at each log step, "eval" lines at each evaluation, one "memory" line) and, at the end, an SVG
// of loss and simulated acceptance length over steps. Resumed runs append; the curves are drawn
// from the whole file.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace eaglet {

class MetricsLog {
 public:
  explicit MetricsLog(std::string path);  // empty path: records nothing
  void write(const nlohmann::json& line);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// 1 + sum over k = 1..min(depth, n) of prod_{i<=k} acc_i: the expected tokens per chain step of
// `depth` drafted tokens if step i is accepted with probability acc_i.
double simulated_acceptance(const std::vector<double>& acc, int depth);

// Draws loss (train) and simulated acceptance length (train and eval) against step from the
// metrics file into an SVG; steps that a resumed run repeated keep their last value.
void write_curves_svg(const std::string& metrics_path, const std::string& svg_path,
                      const std::string& acceptance_label = "simulated acceptance length (k = 3, chain)");

}  // namespace eaglet
