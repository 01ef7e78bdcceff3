// Fork-join pool for the kernels. parallel_for gives each thread an equal share of [0, n); a
// thread takes grain-aligned chunks of its own share from a counter on its own cache line, then
// steals chunks from the others' shares until none are left. On a VM a thread can lose its core
// for a moment, and static shares alone would leave the others waiting (measured: 13% of decode
// time spent waiting with static halves, 5% with sixteen chunks per thread from one shared
// counter); one shared counter, though, moves its cache line between cores on every chunk
// (~7 us per empty fork-join here against ~1 us with own counters). Which thread runs an item
// never changes the item's result (every kernel computes each output element by one code path),
// so results are bitwise identical across thread counts.
//
// A decode step is a chain of ~100 short fork-joins (one per matmul), each worth a few hundred
// microseconds of memory streaming. Waking a sleeping thread through the kernel costs tens of
// microseconds on a VM, so workers spin for a short while after each job (like ggml's threads
// between graph nodes) and only then sleep on the condition variable.
//
// There is no process-wide pool. Whoever runs models (a command, the engine core, the trainer's
// inference thread, a test) owns one and passes it down to every parallel op, as gemma.cpp passes
// its threading context: what runs on which threads is visible at each call.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace eaglet {

class ThreadPool {
 public:
  // num_threads <= 0: one per core this process may run on. `thread_init(index)` runs once on each
  // worker before its first job, and on a thread that calls parallel_for (index 0) before that
  // thread's first job here (again if it ran another pool's jobs since): per-thread CPU state a
  // kernel needs (AMX's tile configuration is per thread) is set up where the work runs.
  explicit ThreadPool(int num_threads, std::function<void(int)> thread_init = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // fn(begin, end, thread_index), possibly several times per thread; chunks are aligned to
  // `grain` items.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                    int64_t grain = 1);

  static int default_threads();  // cores this process may run on

  // Lends `n` threads (the highest-numbered workers; at most size() - 1) to other work until
  // lend(0): jobs announced from then on run on the others, and the lent workers sleep, so their
  // cores are free (the online trainer's guaranteed core on a busy server). Results do not
  // change: they never depend on which or how many threads ran.
  void lend(int n);
  int lent() const { return lent_.load(std::memory_order_relaxed); }

 private:
  void worker_loop(int index);
  void sleep_while_lent(int index);
  void run_chunks(int index);  // takes chunks of the current job, own share first, until none are left
  // Spins until `announced_` moves past `seen` or the spin budget runs out; returns the new one.
  uint64_t spin_for_job(uint64_t seen) const;
  // A job's announcement: its generation and how many threads run it, in one word, so a worker
  // knows whether it takes part from the same read that tells it a job is there.
  static constexpr int kThreadBits = 16;
  static int job_threads(uint64_t announced) { return int(announced & ((1u << kThreadBits) - 1)); }

  // One thread's share of the current job: chunks start at `next` until it passes `end`.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };

  void init_caller();  // thread_init(0) on this thread, once per thread and pool

  int num_threads_;
  std::function<void(int)> thread_init_;
  const uint64_t serial_;  // tells pools apart on a thread (an address can be reused)
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  std::unique_ptr<Share[]> shares_;
  // Written by parallel_for before it moves the generation, read by the workers after.
  alignas(64) std::atomic<uint64_t> announced_{0};  // generation << kThreadBits | threads of the job
  int job_threads_ = 1;
  std::atomic<int> lent_{0};
  std::condition_variable cv_returned_;  // lent workers wait here until they are returned
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_chunk_ = 1;
  alignas(64) std::atomic<int> pending_{0};  // workers still running the current job
  std::atomic<int> sleepers_{0};  // workers blocked on cv_start_ (they need a notify)
  std::atomic<bool> stop_{false};
  std::mutex run_mu_;  // one parallel_for at a time
};

}  // namespace eaglet
