#include "core/thread_pool.h"

#include <sched.h>

#include <memory>

namespace eaglet {

namespace {
std::unique_ptr<ThreadPool> g_pool;
std::mutex g_pool_mu;

void chunk_range(int64_t n, int64_t grain, int parts, int index, int64_t* b, int64_t* e) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t per = units / parts, extra = units % parts;
  const int64_t ub = index * per + std::min<int64_t>(index, extra);
  const int64_t ue = ub + per + (index < extra ? 1 : 0);
  *b = std::min(n, ub * grain);
  *e = std::min(n, ue * grain);
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)>* job;
    int64_t n, grain;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_start_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      grain = job_grain_;
    }
    int64_t b, e;
    chunk_range(n, grain, num_threads_, index, &b, &e);
    if (b < e) (*job)(b, e, index);
    if (pending_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lk(mu_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> run_lk(run_mu_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    pending_.store(num_threads_ - 1);
    ++generation_;
  }
  cv_start_.notify_all();
  int64_t b, e;
  chunk_range(n, grain, num_threads_, 0, &b, &e);
  if (b < e) fn(b, e, 0);
  // Short spin first: most kernels finish within microseconds of each other.
  for (int spin = 0; spin < 20000 && pending_.load(std::memory_order_acquire) != 0; ++spin) {
  }
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return pending_.load() == 0; });
  job_ = nullptr;
}

int ThreadPool::default_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(default_threads());
  return *g_pool;
}

void ThreadPool::set_global_threads(int n) {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  if (n <= 0) n = default_threads();
  if (g_pool && g_pool->size() == n) return;
  g_pool = std::make_unique<ThreadPool>(n);
}

}  // namespace eaglet
