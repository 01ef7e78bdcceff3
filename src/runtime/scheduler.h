// The serving loop: a thread that admits queued requests into the engine core while sequence
// slots and KV blocks allow, runs engine steps (engine/engine_core.h) while there is work, and
// publishes the gauges. Requests are fed in from the HTTP threads through submit().
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine_core.h"
#include "engine/model_bundle.h"
#include "runtime/serving_metrics.h"

namespace eaglet {

struct SchedulerOptions : EngineOptions {
  int max_waiting = 256;        // queue bound; beyond it submit() refuses
  double log_interval_s = 10;   // SpecDecoding metrics log line
};

class Scheduler {
 public:
  // The engine runs every forward on `pool` (which must outlive the scheduler).
  Scheduler(ThreadPool& pool, ModelBundle& bundle, const SpecSetup& spec, SchedulerOptions opts,
            ServingMetrics& metrics);
  ~Scheduler();
  // The engine's options, with the KV cache size and max_model_len resolved.
  const EngineOptions& options() const { return engine_.options(); }

  // Queues a request; false when the waiting queue is full. Requests whose prompt plus
  // max_tokens cannot fit the context must be rejected by the caller first.
  bool submit(std::shared_ptr<Request> r);
  // Stops the loop; in-flight requests finish with "abort".
  void shutdown();
  // Runs `task` on the engine's thread between two steps (a draft swap, turning capture on) and
  // waits for it; what it throws is rethrown here.
  void run_on_engine(const std::function<void(EngineCore&)>& task);
  // Requests queued for admission: the server is saturated while any wait.
  int num_waiting();
  // Share of the last ~second the engine spent stepping (0 idle .. 1 saturated).
  double utilization() const { return utilization_.load(); }

 private:
  void loop();
  void admit();
  void publish_gauges();

  SchedulerOptions opts_;
  ServingMetrics& metrics_;
  EngineCore engine_;
  std::deque<std::shared_ptr<Request>> waiting_;
  std::deque<std::function<void()>> tasks_;  // run_on_engine's, run between steps
  std::atomic<double> utilization_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace eaglet
