// Counters and histograms of the serving loop in the Prometheus text format, under vLLM's metric
// names and labels (prefix "vllm:", labels model_name and engine), so dashboards and alerts
// written for vLLM work unchanged; acceptance length is 1 + accepted / drafts as vLLM defines it.
// `--metrics-prefix eaglet` renames the families for deployments that run both side by side.
#pragma once
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_observer.h"
#include "speculation/metrics.h"

namespace eaglet {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // `labels`: the family's common labels, already escaped ("model_name=\"m\",engine=\"0\"").
  std::string render(const std::string& name, const std::string& help, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// A Prometheus label value: backslash, double quote and newline escaped.
std::string prometheus_label_value(const std::string& v);

class ServingMetrics : public EngineObserver {
 public:
  explicit ServingMetrics(std::string prefix = "vllm");
  void request_finished(const std::string& reason, const RequestTimes& t) override;
  void tokens(int64_t prompt, int64_t generation) override;
  void time_to_first_token(double s) override;
  void inter_token_latency(double s) override;
  void iteration(int64_t tokens) override;
  void spec_step(int drafted, int accepted, int depth) override;
  void set_gauges(int running, int waiting, double kv_usage);
  // Labels of the cache_config_info gauge (block_size, num_gpu_blocks, ...), as vLLM exposes them.
  void set_cache_config(std::vector<std::pair<std::string, std::string>> labels);
  // Online learning (`serve --online-train`): these families, named eaglet:*, appear once it is on.
  struct OnlineTraining {
    int64_t steps = 0, samples = 0, dropped = 0;  // trainer steps, samples trained on, samples dropped (queue full)
    int64_t rejected = 0;  // candidates the guard turned down
    double train_seconds = 0, busy_train_seconds = 0;  // trainer stepping; of it, while the engine was busy
  };
  void enable_online_training() { std::lock_guard<std::mutex> lk(mu_); online_on_ = true; }
  void set_online_training(const OnlineTraining& t);
  // The draft version serving from now on; spec_step() counts per version. A swap or a rollback
  // counts one of each kind.
  void set_draft_version(int version) override;
  void structured_output(int64_t masks, double mask_seconds, int64_t refused_drafts) override;
  void count_draft_swap();
  void count_draft_rollback();
  // Speculation counters of one draft version (empty when it never served).
  SpecMetrics version_metrics(int version) const;
  // A version's acceptance over its most recent drafts, at most `recent_drafts` of them (set by
  // set_recent_drafts, 2000 by default): where it stands now, not its whole-life mean.
  struct Recent {
    int64_t drafts = 0;
    double acceptance_length = 1.0;
  };
  Recent recent_acceptance(int version) const;
  void set_recent_drafts(int64_t n);
  std::string render(const std::string& model_name) const;
  // vLLM-style "SpecDecoding metrics: ..." for the interval since the last call.
  std::string take_interval_summary();

 private:
  std::string render_online(const std::string& labels) const;  // with mu_ held
  std::string render_structured(const std::string& labels) const;  // with mu_ held
  const std::string prefix_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  int running_ = 0, waiting_ = 0;
  double kv_usage_ = 0;
  std::vector<std::pair<std::string, std::string>> cache_config_;
  Histogram ttft_, itl_, tpot_, e2e_, queue_, prefill_, decode_, request_tpot_, prompt_len_, generation_len_,
      iteration_tokens_, draft_tokens_;
  SpecMetrics spec_, interval_;
  bool online_on_ = false;
  OnlineTraining online_;
  int draft_version_ = 0;
  int64_t swaps_ = 0, rollbacks_ = 0;
  int64_t constrained_requests_ = 0, masks_ = 0, refused_drafts_ = 0;
  double mask_seconds_ = 0;
  std::map<int, SpecMetrics> by_version_;
  // The accepted tokens of each version's last `capacity` drafts (a ring).
  struct Window {
    std::vector<uint16_t> accepted;
    size_t next = 0;
    int64_t sum = 0;
    void add(int accepted_tokens, int64_t capacity);
    double acceptance_length() const { return 1.0 + double(sum) / double(accepted.size()); }
  };
  int64_t recent_drafts_ = 2000;
  std::map<int, Window> recent_;
};

}  // namespace eaglet
