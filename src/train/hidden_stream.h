// Target hidden states streaming to the trainer. Inference workers (threads in this process, or
// `eaglet infer-worker` processes over ZeroMQ) run the target's prefill over each sample with
// taps at the aux layers and the last layer, and hand the trainer
//   input_ids [T], aux [T, 3H], last_hidden [T, H] (pre-norm), loss_mask [T].
// The trainer consumes samples strictly in index order (a reorder buffer absorbs worker timing),
// so a run is deterministic whatever the number of workers, and a resumed run sees the same
// batches. Workers block when the trainer is `capacity` samples behind (backpressure).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "models/model.h"
#include "train/dataset.h"

namespace eaglet {

struct HiddenSample {
  int64_t index = 0;
  std::vector<int> ids;
  std::vector<uint8_t> loss_mask;
  std::vector<float> aux;   // [T, 3H]
  std::vector<float> last;  // [T, H]
  int hidden = 0;
};

// Runs the target over one sample and collects its taps (aux layers ascending, then layer L).
HiddenSample compute_hidden(ThreadPool& pool, Model& target, const TrainSample& s, const std::vector<int>& aux_layers);

struct StreamStats {
  int64_t produced = 0, consumed = 0;
  double trainer_wait_seconds = 0;  // trainer blocked waiting for the next sample
  double worker_wait_seconds = 0;   // workers blocked by backpressure (summed over workers)
  double worker_busy_seconds = 0;   // workers computing (summed)
  size_t depth = 0;                 // samples ready but not yet consumed
  int64_t reassigned = 0;           // samples handed to another worker after theirs died
};

// Ordered, bounded hand-over between producers and the trainer.
class SampleBuffer {
 public:
  SampleBuffer(int64_t first_index, int64_t end_index, int capacity);
  // Producer side: blocks while `index` is too far ahead of the consumer; false once closed.
  bool wait_for_slot(int64_t index);
  void put(HiddenSample s, double busy_seconds);
  // Consumer side: the next sample in index order; false when the stream ended or failed.
  bool take(HiddenSample* out);
  void close(const std::string& error = "");  // unblocks everyone; error ends the run
  const std::string& error() const { return error_; }
  StreamStats stats() const;
  int64_t next_index() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, HiddenSample> ready_;
  int64_t next_, end_;
  int capacity_;
  bool closed_ = false;
  std::string error_;
  StreamStats stats_;
};

// A producer of hidden samples for indices [first, end) of `samples`.
class HiddenSource {
 public:
  virtual ~HiddenSource() = default;
  virtual bool take(HiddenSample* out) = 0;
  virtual StreamStats stats() const = 0;
  virtual void stop() = 0;
};

// `workers` threads compute samples, their forwards sharing `pool` (which must outlive the source).
std::unique_ptr<HiddenSource> make_thread_source(ThreadPool& pool, Model& target, const std::vector<TrainSample>& samples,
                                                 const std::vector<int>& aux_layers, int64_t first, int64_t end,
                                                 int workers, int capacity);
// Binds `endpoint`; `eaglet infer-worker --connect endpoint -m TARGET` processes do the work.
std::unique_ptr<HiddenSource> make_zmq_source(const std::string& endpoint, const std::vector<TrainSample>& samples,
                                              const std::vector<int>& aux_layers, int hidden, int64_t first,
                                              int64_t end, int capacity, int worker_timeout_s);
// The worker loop: connects, asks for work, computes, returns results until told to stop.
// Returns the number of samples it computed. `max_samples` > 0 makes it exit early (tests use
// this to play a worker that dies).
int64_t run_inference_worker(ThreadPool& pool, Model& target, const std::string& endpoint, int64_t max_samples = 0);

}  // namespace eaglet
