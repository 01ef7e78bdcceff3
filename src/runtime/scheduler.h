// Continuous batching. One loop admits requests as they arrive (while sequences and KV blocks
// allow), chunks long prefills, and runs every running sequence's decode or k+1-token
// verification in one batched target forward, with one batched draft pass per draft step.
// Finished or cancelled sequences free their KV blocks at once. Because the kernels are batch
// invariant, a greedy request produces the same tokens alone or under load.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/model_bundle.h"
#include "runtime/request.h"
#include "runtime/serving_metrics.h"
#include "spec/spec_setup.h"

namespace eaglet {

struct SchedulerOptions {
  int max_num_seqs = 16;
  int max_model_len = 0;        // 0: the model's context length
  int64_t kv_blocks = 0;        // 0: room for max_num_seqs full-length sequences, within kv_cache_bytes
  int64_t kv_cache_bytes = 0;   // KV memory (target + draft) budget; 0: half the memory available
  int prefill_chunk = 512;      // prompt tokens per step, over all sequences
  int max_waiting = 256;        // queue bound; beyond it submit() refuses
  double log_interval_s = 10;   // SpecDecoding metrics log line
};

class Scheduler {
 public:
  Scheduler(ModelBundle& bundle, const SpecSetup& spec, SchedulerOptions opts, ServingMetrics& metrics);
  ~Scheduler();
  const SchedulerOptions& options() const { return opts_; }

  // Queues a request; false when the waiting queue is full. Requests whose prompt plus
  // max_tokens cannot fit the context must be rejected by the caller first.
  bool submit(std::shared_ptr<Request> r);
  // Stops the loop; in-flight requests finish with "abort".
  void shutdown();

 private:
  struct Seq;
  bool uses_drafter() const;
  void size_kv_cache();
  void loop();
  void step();
  void admit();
  void finish(Seq& s, const std::string& reason);
  void publish_gauges();
  bool emit(Seq& s, int token, const float* logits_row);

  ModelBundle& bundle_;
  const SpecSetup& spec_;
  SchedulerOptions opts_;
  ServingMetrics& metrics_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<class Eagle3Drafter> drafter_;
  std::vector<std::unique_ptr<Seq>> running_;
  std::deque<std::shared_ptr<Request>> waiting_;
  int64_t reserved_blocks_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace eaglet
