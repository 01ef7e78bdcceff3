#include "runtime/scheduler.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <future>

#include "core/error.h"

namespace eaglet {

namespace {
using clock_type = std::chrono::steady_clock;
}

Scheduler::Scheduler(ThreadPool& pool, ModelBundle& bundle, const SpecSetup& spec, SchedulerOptions opts,
                     ServingMetrics& metrics)
    : opts_(opts), metrics_(metrics), engine_(pool, *bundle.model, bundle.tokenizer, spec, opts, &metrics) {
  const EngineOptions& e = engine_.options();
  spdlog::info("KV cache: {} blocks of 16 tokens, max_model_len {}, up to {} sequences", e.kv_blocks, e.max_model_len,
               e.max_num_seqs);
  metrics_.set_cache_config({{"block_size", "16"},
                             {"num_gpu_blocks", std::to_string(e.kv_blocks)},  // vLLM's name; eaglet's blocks are in CPU memory
                             {"num_cpu_blocks", std::to_string(e.kv_blocks)},
                             {"cache_dtype", "auto"},
                             {"enable_prefix_caching", "False"}});
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { shutdown(); }

bool Scheduler::submit(std::shared_ptr<Request> r) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stop_ || int(waiting_.size()) >= opts_.max_waiting) return false;
  waiting_.push_back(std::move(r));
  cv_.notify_one();
  return true;
}

void Scheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& t : tasks_) t();  // the loop has ended, so nobody waits for them in vain
  tasks_.clear();
  engine_.abort_all("abort");
  for (auto& r : waiting_)
    if (r->on_finish) r->on_finish("abort", 0);
  waiting_.clear();
}

void Scheduler::run_on_engine(const std::function<void(EngineCore&)>& task) {
  std::promise<void> done;
  auto result = done.get_future();
  {
    std::lock_guard<std::mutex> lk(mu_);
    EAGLET_CHECK(!stop_, "the engine is shutting down");
    tasks_.push_back([&] {
      try {
        task(engine_);
        done.set_value();
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
  }
  cv_.notify_one();
  result.get();
}

int Scheduler::num_waiting() {
  std::lock_guard<std::mutex> lk(mu_);
  return int(waiting_.size());
}

void Scheduler::admit() {
  std::lock_guard<std::mutex> lk(mu_);
  while (!waiting_.empty() && engine_.try_add(waiting_.front())) waiting_.pop_front();  // else: wait for blocks
}

// After every admission and every step, so an idle server reports zero running requests and an
// empty cache (updating only on admission left the last busy values on display forever).
void Scheduler::publish_gauges() {
  size_t waiting;
  {
    std::lock_guard<std::mutex> lk(mu_);
    waiting = waiting_.size();
  }
  metrics_.set_gauges(engine_.num_running(), int(waiting), engine_.kv_usage());
}

void Scheduler::loop() {
  auto last_log = clock_type::now();
  std::deque<std::function<void()>> tasks;
  // Utilization over windows of about a second (also while idle: the wait wakes to close them).
  auto window_start = clock_type::now();
  double window_busy = 0;
  auto roll = [&](clock_type::time_point now) {
    if (const double w = std::chrono::duration<double>(now - window_start).count(); w >= 1.0) {
      utilization_ = window_busy / w;
      window_start = now;
      window_busy = 0;
    }
  };
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      while (!cv_.wait_for(lk, std::chrono::milliseconds(250),
                           [&] { return stop_ || !waiting_.empty() || !tasks_.empty() || engine_.has_work(); }))
        roll(clock_type::now());
      if (stop_) return;
      tasks = std::move(tasks_);
      tasks_.clear();
    }
    for (auto& t : tasks) t();
    tasks.clear();
    const auto busy_from = clock_type::now();
    try {
      admit();
      engine_.step();
    } catch (const std::exception& e) {
      spdlog::error("engine step failed: {}; aborting the running requests", e.what());
      engine_.abort_all("abort");
    }
    const auto now = clock_type::now();
    window_busy += std::chrono::duration<double>(now - busy_from).count();
    roll(now);
    publish_gauges();
    if (std::chrono::duration<double>(clock_type::now() - last_log).count() > opts_.log_interval_s) {
      last_log = clock_type::now();
      const std::string line = metrics_.take_interval_summary();
      if (!line.empty()) spdlog::info("{}", line);
    }
  }
}

}  // namespace eaglet
