#include "runtime/serving_metrics.h"

#include "core/system_memory.h"

#include <fmt/format.h>

namespace eaglet {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

ServingMetrics::ServingMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}),
      draft_tokens_({1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 63}) {}

void ServingMetrics::request_finished(const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  ++finished_[reason];
}

void ServingMetrics::tokens(int64_t prompt, int64_t generation) {
  std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += prompt;
  generation_tokens_ += generation;
}

void ServingMetrics::time_to_first_token(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  ttft_.observe(s);
}

void ServingMetrics::inter_token_latency(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  itl_.observe(s);
}

void ServingMetrics::spec_step(int drafted, int accepted, int depth) {
  std::lock_guard<std::mutex> lk(mu_);
  spec_.record(drafted, accepted, depth);
  interval_.record(drafted, accepted, depth);
  draft_tokens_.observe(drafted);
}

void ServingMetrics::set_gauges(int running, int waiting, double kv_usage) {
  std::lock_guard<std::mutex> lk(mu_);
  running_ = running;
  waiting_ = waiting;
  kv_usage_ = kv_usage;
}

std::string ServingMetrics::take_interval_summary() {
  std::lock_guard<std::mutex> lk(mu_);
  if (interval_.num_drafts == 0) return "";
  std::string s = interval_.summary();
  interval_ = SpecMetrics{};
  return s;
}

std::string ServingMetrics::render(const std::string& model) const {
  std::lock_guard<std::mutex> lk(mu_);
  const std::string l = fmt::format("model_name=\"{}\"", model);
  std::string out;
  auto counter = [&](const std::string& name, const std::string& help, const std::string& labels, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", name, help, name, name, labels, v);
  };
  auto gauge = [&](const std::string& name, const std::string& help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name, l, v);
  };
  gauge("eaglet:num_requests_running", "Sequences in the running batch.", running_);
  gauge("eaglet:num_requests_waiting", "Requests waiting to be admitted.", waiting_);
  gauge("eaglet:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (0-1).", kv_usage_);
  counter("eaglet:prompt_tokens_total", "Prefill tokens processed.", l, double(prompt_tokens_));
  counter("eaglet:generation_tokens_total", "Generated tokens.", l, double(generation_tokens_));
  out += "# HELP eaglet:request_success_total Finished requests by finish reason.\n# TYPE eaglet:request_success_total counter\n";
  for (const char* r : {"stop", "length", "abort"}) {
    auto it = finished_.find(r);
    out += fmt::format("eaglet:request_success_total{{{},finished_reason=\"{}\"}} {}\n", l, r, it == finished_.end() ? 0 : it->second);
  }
  out += ttft_.render("eaglet:time_to_first_token_seconds", "Time to first token.");
  out += itl_.render("eaglet:inter_token_latency_seconds", "Time between streamed tokens.");
  counter("eaglet:spec_decode_num_drafts_total", "Speculative steps with at least one draft token.", l, double(spec_.num_drafts));
  counter("eaglet:spec_decode_num_draft_tokens_total", "Draft tokens proposed.", l, double(spec_.num_draft_tokens));
  counter("eaglet:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", l, double(spec_.num_accepted_tokens));
  out += "# HELP eaglet:spec_decode_num_accepted_tokens_per_pos_total Accepted draft tokens by position.\n"
         "# TYPE eaglet:spec_decode_num_accepted_tokens_per_pos_total counter\n";
  for (size_t i = 0; i < spec_.accepted_per_pos.size(); ++i)
    out += fmt::format("eaglet:spec_decode_num_accepted_tokens_per_pos_total{{{},position=\"{}\"}} {}\n", l, i,
                       spec_.accepted_per_pos[i]);
  out += draft_tokens_.render("eaglet:spec_decode_draft_tokens_per_step",
                              "Draft tokens (chain or tree nodes) a sequence's verification checked, as the draft policy chose.");
  // The process collector's name, which dashboards (and the soak test) watch for leaks.
  out += fmt::format("# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                     "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}\n",
                     resident_memory_bytes());
  return out;
}

}  // namespace eaglet
