// Fork-join pool for the kernels: parallel_for splits [0, n) into one contiguous chunk per
// worker, so each output element is always computed by the same code path whatever the thread
// count; results are bitwise identical across thread counts.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace eaglet {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // fn(begin, end, thread_index); chunks are aligned to `grain` items.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                    int64_t grain = 1);

  // The process-wide pool kernels use; set once from --threads.
  static ThreadPool& global();
  static void set_global_threads(int n);
  static int default_threads();  // cores this process may run on

 private:
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0, job_grain_ = 1;
  uint64_t generation_ = 0;
  std::atomic<int> pending_{0};
  bool stop_ = false;
  std::mutex run_mu_;  // one parallel_for at a time
};

}  // namespace eaglet
