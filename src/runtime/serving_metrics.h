// Counters and histograms of the serving loop, exposed in the Prometheus text format with the
// names vLLM uses (prefixed eaglet:), so existing dashboards compute acceptance length as
// 1 + accepted / drafts.
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "speculation/metrics.h"

namespace eaglet {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServingMetrics {
 public:
  ServingMetrics();
  void request_finished(const std::string& reason);
  void tokens(int64_t prompt, int64_t generation);
  void time_to_first_token(double s);
  void inter_token_latency(double s);
  // One verified draft (chain or tree) of `drafted` tokens and `depth` levels.
  void spec_step(int drafted, int accepted, int depth = -1);
  void set_gauges(int running, int waiting, double kv_usage);
  std::string render(const std::string& model_name) const;
  // vLLM-style "SpecDecoding metrics: ..." for the interval since the last call.
  std::string take_interval_summary();

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  int running_ = 0, waiting_ = 0;
  double kv_usage_ = 0;
  Histogram ttft_, itl_, draft_tokens_;
  SpecMetrics spec_, interval_;
};

}  // namespace eaglet
