#include "train/hidden_stream.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <thread>

#include "core/error.h"
#include "engine/generator.h"

namespace eaglet {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

HiddenSample compute_hidden(ThreadPool& pool, Model& target, const TrainSample& s, const std::vector<int>& aux_layers) {
  const int L = target.config().num_layers, H = target.config().hidden;
  std::vector<int> taps = aux_layers;
  taps.push_back(L);
  KvCache cache(target.kv_shape(kv_blocks_for(int64_t(s.ids.size()))));
  const SeqId seq = cache.create();
  std::vector<float> all;
  prefill(pool, target, cache, seq, s.ids, 512, taps, &all);
  HiddenSample h;
  h.index = s.index;
  h.ids = s.ids;
  h.loss_mask = s.loss_mask;
  h.hidden = H;
  const size_t T = s.ids.size(), A = aux_layers.size() * size_t(H);
  h.aux.resize(T * A);
  h.last.resize(T * size_t(H));
  for (size_t t = 0; t < T; ++t) {
    const float* row = all.data() + t * (A + size_t(H));
    std::copy(row, row + A, h.aux.data() + t * A);
    std::copy(row + A, row + A + size_t(H), h.last.data() + t * size_t(H));
  }
  return h;
}

SampleBuffer::SampleBuffer(int64_t first_index, int64_t end_index, int capacity)
    : next_(first_index), end_(end_index), capacity_(capacity) {}

bool SampleBuffer::wait_for_slot(int64_t index) {
  std::unique_lock<std::mutex> lk(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  cv_.wait(lk, [&] { return closed_ || index < next_ + capacity_; });
  stats_.worker_wait_seconds += seconds_since(t0);
  return !closed_;
}

void SampleBuffer::put(HiddenSample s, double busy_seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.worker_busy_seconds += busy_seconds;
  if (closed_ || s.index < next_ || ready_.count(s.index)) return;  // late duplicate of reassigned work
  ++stats_.produced;
  ready_.emplace(s.index, std::move(s));
  cv_.notify_all();
}

bool SampleBuffer::take(HiddenSample* out) {
  std::unique_lock<std::mutex> lk(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  cv_.wait(lk, [&] { return closed_ || next_ >= end_ || ready_.count(next_); });
  stats_.trainer_wait_seconds += seconds_since(t0);
  if (!ready_.count(next_)) return false;
  *out = std::move(ready_[next_]);
  ready_.erase(next_);
  ++next_;
  ++stats_.consumed;
  cv_.notify_all();
  return true;
}

void SampleBuffer::close(const std::string& error) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!error.empty() && error_.empty()) error_ = error;
  closed_ = true;
  cv_.notify_all();
}

StreamStats SampleBuffer::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  StreamStats s = stats_;
  s.depth = ready_.size();
  return s;
}

int64_t SampleBuffer::next_index() const {
  std::lock_guard<std::mutex> lk(mu_);
  return next_;
}

namespace {
class ThreadSource : public HiddenSource {
 public:
  ThreadSource(ThreadPool& pool, Model& target, const std::vector<TrainSample>& samples, const std::vector<int>& aux, int64_t first,
               int64_t end, int workers, int capacity)
      : buffer_(first, end, capacity), next_(first), end_(end) {
    for (int w = 0; w < std::max(1, workers); ++w)
      threads_.emplace_back([this, &pool, &target, &samples, aux] {
        try {
          for (;;) {
            const int64_t i = next_.fetch_add(1);
            if (i >= end_ || !buffer_.wait_for_slot(i)) return;
            const auto t0 = std::chrono::steady_clock::now();
            HiddenSample h = compute_hidden(pool, target, samples[size_t(i)], aux);
            buffer_.put(std::move(h), seconds_since(t0));
          }
        } catch (const std::exception& e) {
          buffer_.close(std::string("inference worker failed: ") + e.what());
        }
      });
  }
  ~ThreadSource() override { stop(); }
  bool take(HiddenSample* out) override {
    if (buffer_.take(out)) return true;
    if (!buffer_.error().empty()) fail("{}", buffer_.error());
    return false;
  }
  StreamStats stats() const override { return buffer_.stats(); }
  void stop() override {
    buffer_.close();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  SampleBuffer buffer_;
  std::atomic<int64_t> next_;
  int64_t end_;
  std::vector<std::thread> threads_;
};
}  // namespace

std::unique_ptr<HiddenSource> make_thread_source(ThreadPool& pool, Model& target, const std::vector<TrainSample>& samples,
                                                 const std::vector<int>& aux_layers, int64_t first, int64_t end,
                                                 int workers, int capacity) {
  return std::make_unique<ThreadSource>(pool, target, samples, aux_layers, first, end, workers, capacity);
}

}  // namespace eaglet
