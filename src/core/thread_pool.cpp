#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace eaglet {

namespace {
// How a thread waits for the other side of a fork-join: pause instructions first (the next job
// or the last worker is usually microseconds away), then yields, so that when processes share
// cores (ctest -j, a trainer beside a server) the waiting thread hands its core to the one it
// waits for; after the whole budget it gives up and the caller sleeps on a condition variable.
// Yields are system calls, costly on a VM, hence the pause phase first.
class Spinner {
 public:
  Spinner() : start_(std::chrono::steady_clock::now()) {}
  // One wait step; false once the budget is spent.
  bool step() {
    if ((++i_ & 63) == 0) {
      const auto spent = std::chrono::steady_clock::now() - start_;
      if (spent > kBudget) return false;
      yield_ = spent > kPausePhase;
    }
    if (yield_) {
      std::this_thread::yield();
    } else {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    return true;
  }

 private:
  // Long enough to bridge the gaps between the matmuls of a forward pass, short enough that an
  // idle server's workers are asleep almost at once.
  static constexpr std::chrono::microseconds kPausePhase{50}, kBudget{500};
  std::chrono::steady_clock::time_point start_;
  int i_ = 0;
  bool yield_ = false;
};

}  // namespace

namespace {
std::atomic<uint64_t> g_pool_serial{0};
thread_local uint64_t t_initialised_for = 0;  // the serial of the pool whose thread_init ran here last
}  // namespace

ThreadPool::ThreadPool(int num_threads, std::function<void(int)> thread_init)
    : num_threads_(std::min(num_threads > 0 ? num_threads : default_threads(), (1 << kThreadBits) - 1)),
      thread_init_(std::move(thread_init)),
      serial_(++g_pool_serial), shares_(std::make_unique<Share[]>(size_t(num_threads_))) {
  for (int i = 1; i < num_threads_; ++i)
    workers_.emplace_back([this, i] {
      if (thread_init_) thread_init_(i);
      worker_loop(i);
    });
}

void ThreadPool::init_caller() {
  if (!thread_init_ || t_initialised_for == serial_) return;
  thread_init_(0);
  t_initialised_for = serial_;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    announced_.fetch_add(uint64_t(1) << kThreadBits);
  }
  cv_start_.notify_all();
  cv_returned_.notify_all();
  for (auto& t : workers_) t.join();
}

uint64_t ThreadPool::spin_for_job(uint64_t seen) const {
  Spinner spin;
  do {
    const uint64_t g = announced_.load(std::memory_order_acquire);
    if (g != seen) return g;
  } while (spin.step());
  return seen;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = spin_for_job(seen);
    if (g == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1);
      cv_start_.wait(lk, [&] { return announced_.load() != seen; });
      sleepers_.fetch_sub(1);
      g = announced_.load();
    }
    seen = g;
    if (stop_.load()) return;
    if (index >= job_threads(g)) {  // lent: not counted in this job; sleep until returned
      sleep_while_lent(index);
      continue;
    }
    // job_ and its bounds were written before the generation moved (release / acquire).
    run_chunks(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mu_);
      cv_done_.notify_one();
    }
  }
}

// A job announced while this worker is returned includes it and cannot finish without it, so
// the worker wakes for it: the loop reads the latest announcement next.
void ThreadPool::sleep_while_lent(int index) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_returned_.wait(lk, [&] { return stop_.load() || index < num_threads_ - lent_.load(); });
}

void ThreadPool::lend(int n) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    lent_.store(std::clamp(n, 0, num_threads_ - 1));
  }
  cv_returned_.notify_all();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  init_caller();
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ - lent() <= 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> run_lk(run_mu_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    const int threads = num_threads_ - lent_.load();
    job_ = &fn;
    job_threads_ = threads;
    pending_.store(threads - 1, std::memory_order_relaxed);
    // Shares of whole grains, split as evenly as they go; chunks of about a sixteenth of a share
    // keep the wait for the last one short.
    const int64_t units = (n + grain - 1) / grain;
    for (int t = 0; t < threads; ++t) {
      shares_[size_t(t)].next.store(std::min(n, units * t / threads * grain), std::memory_order_relaxed);
      shares_[size_t(t)].end = std::min(n, units * (t + 1) / threads * grain);
    }
    job_chunk_ = std::max<int64_t>(1, units / (int64_t(threads) * 16)) * grain;
    const uint64_t generation = (announced_.load(std::memory_order_relaxed) >> kThreadBits) + 1;
    announced_.store(generation << kThreadBits | uint64_t(threads), std::memory_order_release);
  }
  // A worker counts itself a sleeper under mu_ before testing the generation, so one that
  // missed the bump above is visible here.
  if (sleepers_.load() > 0) cv_start_.notify_all();
  run_chunks(0);
  Spinner spin;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (!spin.step()) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_done_.wait(lk, [&] { return pending_.load() == 0; });
      break;
    }
  }
  job_ = nullptr;
}

void ThreadPool::run_chunks(int index) {
  for (int k = 0; k < job_threads_; ++k) {
    Share& s = shares_[size_t((index + k) % job_threads_)];
    for (;;) {
      const int64_t b = s.next.fetch_add(job_chunk_, std::memory_order_relaxed);
      if (b >= s.end) break;
      (*job_)(b, std::min(s.end, b + job_chunk_), index);
    }
  }
}

int ThreadPool::default_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace eaglet
