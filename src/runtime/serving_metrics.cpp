#include "runtime/serving_metrics.h"

#include <algorithm>
#include <fmt/format.h>

#include "core/system_memory.h"

namespace eaglet {

namespace {
// Bucket bounds as vLLM's, extended where CPU serving is slower: a large model on a few cores
// takes seconds per token and minutes per request, which must not all land in +Inf.
std::vector<double> latency_buckets() {  // time to first token, queue, prefill
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
          20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> token_buckets() {  // time between tokens
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
          5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> request_buckets() {  // whole requests and their decode phase
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
          120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
std::vector<double> length_buckets() {  // tokens: 1, 2, 5 per decade, as vLLM builds them
  std::vector<double> b;
  for (double m = 1; m <= 1e6; m *= 10)
    for (double k : {1.0, 2.0, 5.0}) b.push_back(k * m);
  return b;
}
double seconds(RequestTimes::time_point a, RequestTimes::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

std::string prometheus_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help, const std::string& labels) const {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, count_, name, labels,
                     sum_, name, labels, count_);
  return out;
}

ServingMetrics::ServingMetrics(std::string prefix)
    : prefix_(std::move(prefix)),
      ttft_(latency_buckets()), itl_(token_buckets()), tpot_(token_buckets()), e2e_(request_buckets()),
      queue_(latency_buckets()), prefill_(latency_buckets()), decode_(request_buckets()), request_tpot_(token_buckets()),
      prompt_len_(length_buckets()), generation_len_(length_buckets()),
      iteration_tokens_({1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}),
      draft_tokens_({1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 63}) {}

void ServingMetrics::request_finished(const std::string& reason, const RequestTimes& t) {
  std::lock_guard<std::mutex> lk(mu_);
  ++finished_[reason];
  e2e_.observe(seconds(t.arrival, t.finished));
  queue_.observe(seconds(t.arrival, t.scheduled));
  if (t.has_first_token) {
    prefill_.observe(seconds(t.scheduled, t.first_token));
    decode_.observe(seconds(t.first_token, t.finished));
    if (t.generation_tokens > 1) request_tpot_.observe(seconds(t.first_token, t.finished) / double(t.generation_tokens - 1));
  }
  prompt_len_.observe(double(t.prompt_tokens));
  generation_len_.observe(double(t.generation_tokens));
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
  tpot_.observe(s);  // vLLM v1 fills time_per_output_token_seconds from the same intervals
}

void ServingMetrics::iteration(int64_t tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  iteration_tokens_.observe(double(tokens));
}

void ServingMetrics::spec_step(int drafted, int accepted, int depth) {
  std::lock_guard<std::mutex> lk(mu_);
  spec_.record(drafted, accepted, depth);
  interval_.record(drafted, accepted, depth);
  if (online_on_) {
    by_version_[draft_version_].record(drafted, accepted, depth);
    recent_[draft_version_].add(accepted, recent_drafts_);
  }
  draft_tokens_.observe(drafted);
}

void ServingMetrics::set_online_training(const OnlineTraining& t) {
  std::lock_guard<std::mutex> lk(mu_);
  online_ = t;
}

void ServingMetrics::structured_output(int64_t masks, double mask_seconds, int64_t refused_drafts) {
  std::lock_guard<std::mutex> lk(mu_);
  ++constrained_requests_;
  masks_ += masks;
  mask_seconds_ += mask_seconds;
  refused_drafts_ += refused_drafts;
}

void ServingMetrics::set_draft_version(int version) {
  std::lock_guard<std::mutex> lk(mu_);
  draft_version_ = version;
}

void ServingMetrics::count_draft_swap() {
  std::lock_guard<std::mutex> lk(mu_);
  ++swaps_;
}

void ServingMetrics::count_draft_rollback() {
  std::lock_guard<std::mutex> lk(mu_);
  ++rollbacks_;
}

SpecMetrics ServingMetrics::version_metrics(int version) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_version_.find(version);
  return it == by_version_.end() ? SpecMetrics{} : it->second;
}

void ServingMetrics::Window::add(int accepted_tokens, int64_t capacity) {
  const uint16_t a = uint16_t(std::clamp(accepted_tokens, 0, 65535));
  if (int64_t(accepted.size()) < capacity) {
    accepted.push_back(a);
  } else {
    sum -= accepted[next];
    accepted[next] = a;
    next = (next + 1) % accepted.size();
  }
  sum += a;
}

ServingMetrics::Recent ServingMetrics::recent_acceptance(int version) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = recent_.find(version);
  if (it == recent_.end() || it->second.accepted.empty()) return {};
  return {int64_t(it->second.accepted.size()), it->second.acceptance_length()};
}

void ServingMetrics::set_recent_drafts(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  recent_drafts_ = std::max<int64_t>(1, n);
  recent_.clear();  // (set before serving: windows of another length would mix)
}

void ServingMetrics::set_gauges(int running, int waiting, double kv_usage) {
  std::lock_guard<std::mutex> lk(mu_);
  running_ = running;
  waiting_ = waiting;
  kv_usage_ = kv_usage;
}

void ServingMetrics::set_cache_config(std::vector<std::pair<std::string, std::string>> labels) {
  std::lock_guard<std::mutex> lk(mu_);
  cache_config_ = std::move(labels);
}

std::string ServingMetrics::take_interval_summary() {
  std::lock_guard<std::mutex> lk(mu_);
  if (interval_.num_drafts == 0) return "";
  std::string s = interval_.summary();
  interval_ = SpecMetrics{};
  return s;
}

// eaglet's own families (online training, draft versions), whatever the prefix. Called with mu_ held.
std::string ServingMetrics::render_online(const std::string& l) const {
  std::string out;
  auto own = [&](const std::string& name, const char* type, const std::string& help, double v) {
    out += fmt::format("# HELP eaglet:{} {}\n# TYPE eaglet:{} {}\neaglet:{}{{{}}} {}\n", name, help, name, type, name, l, v);
  };
  own("draft_version", "gauge", "Version of the draft serving now (0: the one loaded at start).", draft_version_);
  own("online_train_steps_total", "counter", "Optimiser steps of the online trainer.", double(online_.steps));
  own("online_train_samples_total", "counter", "Served sequences the online trainer trained on.", double(online_.samples));
  own("online_train_dropped_samples_total", "counter", "Captured sequences dropped because the trainer's queue was full.", double(online_.dropped));
  own("online_train_seconds_total", "counter", "Wall seconds the online trainer spent stepping.", online_.train_seconds);
  own("online_train_busy_seconds_total", "counter",
      "Of those, seconds while the engine was busy (the share --online-train-busy-share guarantees).",
      online_.busy_train_seconds);
  own("draft_swaps_total", "counter", "Candidate drafts swapped in after passing the guard.", double(swaps_));
  own("draft_rejected_total", "counter", "Candidate drafts the guard turned down.", double(online_.rejected));
  own("draft_rollbacks_total", "counter", "Draft versions rolled back (automatically or by POST /v1/draft/rollback).", double(rollbacks_));
  out += "# HELP eaglet:spec_decode_acceptance_length Mean acceptance length of each draft version while it served.\n"
         "# TYPE eaglet:spec_decode_acceptance_length gauge\n";
  for (const auto& [v, m] : by_version_)
    out += fmt::format("eaglet:spec_decode_acceptance_length{{{},version=\"{}\"}} {}\n", l, v, m.mean_acceptance_length());
  out += "# HELP eaglet:spec_decode_num_drafts_by_version Drafts verified with each draft version.\n"
         "# TYPE eaglet:spec_decode_num_drafts_by_version counter\n";
  for (const auto& [v, m] : by_version_)
    out += fmt::format("eaglet:spec_decode_num_drafts_by_version{{{},version=\"{}\"}} {}\n", l, v, m.num_drafts);
  out += fmt::format("# HELP eaglet:spec_decode_recent_acceptance_length Acceptance length of each draft version over "
                     "its last {} drafts (where it stands now; the automatic rollback compares these).\n"
                     "# TYPE eaglet:spec_decode_recent_acceptance_length gauge\n", recent_drafts_);
  for (const auto& [v, w] : recent_)
    if (!w.accepted.empty())
      out += fmt::format("eaglet:spec_decode_recent_acceptance_length{{{},version=\"{}\"}} {}\n", l, v,
                         w.acceptance_length());
  // With the drafts, rate() of both gives each version's acceptance over any window of time.
  out += "# HELP eaglet:spec_decode_num_accepted_tokens_by_version Draft tokens accepted with each draft version.\n"
         "# TYPE eaglet:spec_decode_num_accepted_tokens_by_version counter\n";
  for (const auto& [v, m] : by_version_)
    out += fmt::format("eaglet:spec_decode_num_accepted_tokens_by_version{{{},version=\"{}\"}} {}\n", l, v,
                       m.num_accepted_tokens);
  return out;
}

// Structured output's families (eaglet:*), once a constrained request has finished. Called with
// mu_ held.
std::string ServingMetrics::render_structured(const std::string& l) const {
  std::string out;
  auto own = [&](const std::string& name, const std::string& help, double v) {
    out += fmt::format("# HELP eaglet:{} {}\n# TYPE eaglet:{} counter\neaglet:{}{{{}}} {}\n", name, help, name, name, l, v);
  };
  own("structured_output_requests_total", "Finished requests under a grammar (response_format, structured_outputs, ...).",
      double(constrained_requests_));
  own("structured_output_masks_total", "Token masks computed for them (a sampled position or a draft node verified).",
      double(masks_));
  own("structured_output_mask_seconds_total", "Seconds spent computing those masks.", mask_seconds_);
  own("structured_output_refused_draft_tokens_total", "Draft tokens the grammar refused during verification.",
      double(refused_drafts_));
  return out;
}

std::string ServingMetrics::render(const std::string& model) const {
  std::lock_guard<std::mutex> lk(mu_);
  const std::string l = fmt::format("model_name=\"{}\",engine=\"0\"", prometheus_label_value(model));
  const std::string p = prefix_ + ":";
  std::string out;
  auto family = [&](const std::string& name, const char* type, const std::string& help) {
    out += fmt::format("# HELP {}{} {}\n# TYPE {}{} {}\n", p, name, help, p, name, type);
  };
  auto sample = [&](const std::string& name, const std::string& labels, double v) {
    out += fmt::format("{}{}{{{}}} {}\n", p, name, labels, v);
  };
  auto gauge = [&](const std::string& name, const std::string& help, double v) {
    family(name, "gauge", help);
    sample(name, l, v);
  };
  auto counter = [&](const std::string& name, const std::string& help, double v) {
    family(name, "counter", help);
    sample(name, l, v);
  };
  auto histogram = [&](const Histogram& h, const std::string& name, const std::string& help) { out += h.render(p + name, help, l); };

  gauge("num_requests_running", "Number of requests in model execution batches.", running_);
  gauge("num_requests_waiting", "Number of requests waiting to be processed.", waiting_);
  gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv_usage_);
  // Kept under its older vLLM name too: dashboards written for vLLM 0.x query this one.
  gauge("gpu_cache_usage_perc", "KV-cache usage (older name of kv_cache_usage_perc; the cache is in CPU memory).", kv_usage_);
  family("cache_config_info", "gauge", "Information of the KV cache configuration.");
  std::string cc = l;
  for (auto& [k, v] : cache_config_) cc += fmt::format(",{}=\"{}\"", k, prometheus_label_value(v));
  sample("cache_config_info", cc, 1);
  counter("num_preemptions_total", "Cumulative number of preemptions (eaglet reserves a request's KV blocks at admission, so none).", 0);
  counter("prompt_tokens_total", "Number of prefill tokens processed.", double(prompt_tokens_));
  counter("generation_tokens_total", "Number of generation tokens processed.", double(generation_tokens_));
  family("request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* r : {"stop", "length", "abort"}) {
    auto it = finished_.find(r);
    sample("request_success_total", fmt::format("{},finished_reason=\"{}\"", l, r), double(it == finished_.end() ? 0 : it->second));
  }
  histogram(ttft_, "time_to_first_token_seconds", "Histogram of time to first token in seconds.");
  histogram(itl_, "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.");
  histogram(tpot_, "time_per_output_token_seconds", "Histogram of time per output token in seconds.");
  histogram(e2e_, "e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.");
  histogram(queue_, "request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.");
  histogram(prefill_, "request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.");
  histogram(decode_, "request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.");
  histogram(request_tpot_, "request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.");
  histogram(prompt_len_, "request_prompt_tokens", "Number of prefill tokens processed.");
  histogram(generation_len_, "request_generation_tokens", "Number of generation tokens processed.");
  histogram(iteration_tokens_, "iteration_tokens_total", "Histogram of number of tokens per engine_step.");
  counter("spec_decode_num_drafts_total", "Number of spec decoding drafts.", double(spec_.num_drafts));
  counter("spec_decode_num_draft_tokens_total", "Number of draft tokens.", double(spec_.num_draft_tokens));
  counter("spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", double(spec_.num_accepted_tokens));
  family("spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.");
  for (size_t i = 0; i < spec_.accepted_per_pos.size(); ++i)
    sample("spec_decode_num_accepted_tokens_per_pos_total", fmt::format("{},position=\"{}\"", l, i), double(spec_.accepted_per_pos[i]));
  histogram(draft_tokens_, "spec_decode_draft_tokens_per_step",
            "Draft tokens (chain or tree nodes) a sequence's verification checked, as the draft policy chose.");
  if (online_on_) out += render_online(l);
  if (constrained_requests_ > 0) out += render_structured(l);
  // The process collector's name, which dashboards (and the soak test) watch for leaks.
  out += fmt::format("# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                     "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}\n",
                     resident_memory_bytes());
  return out;
}

}  // namespace eaglet
