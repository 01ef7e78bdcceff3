// The fork-join pool: every item runs exactly once whether workers are spinning or asleep
// between jobs, a stalled thread's share is taken over, and the pool shuts down cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace eaglet {
namespace {

// Runs one parallel_for over n items and checks each was visited exactly once, in chunks
// aligned to the grain and by a valid thread index.
void expect_each_item_once(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int> bad_thread{0}, bad_chunk{0};
  pool.parallel_for(
      n,
      [&](int64_t b, int64_t e, int t) {
        if (t < 0 || t >= pool.size()) bad_thread++;
        if (b % grain != 0) bad_chunk++;
        for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
      },
      grain);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "item " << i << " of " << n;
  EXPECT_EQ(bad_thread.load(), 0);
  EXPECT_EQ(bad_chunk.load(), 0);
}

TEST(ThreadPool, BackToBackJobsWhileWorkersSpin) {
  ThreadPool pool(3);
  for (int j = 0; j < 2000; ++j) expect_each_item_once(pool, 1 + j % 97, 1 + j % 5);
}

TEST(ThreadPool, JobsAfterWorkersFellAsleep) {
  // Gaps longer than the spin budget send the workers to the condition variable; the next job
  // must still wake every one of them.
  ThreadPool pool(3);
  for (int j = 0; j < 20; ++j) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    expect_each_item_once(pool, 1000, 16);
  }
}

// Lending threads away (the online trainer's core on a busy server) while jobs run back to back,
// from another thread, as the trainer does: every item still runs once, lent threads run none of
// a job announced while they are lent, and returned ones work again.
TEST(ThreadPool, LentThreadsSitOutJobsUntilReturned) {
  ThreadPool pool(4);
  std::atomic<bool> done{false};
  std::thread lender([&] {
    for (int i = 0; !done.load(); ++i) {
      pool.lend(i % 4);
      std::this_thread::sleep_for(std::chrono::microseconds(200 + 37 * (i % 7)));
    }
    pool.lend(0);
  });
  for (int j = 0; j < 3000; ++j) expect_each_item_once(pool, 1 + j % 113, 1 + j % 3);
  done = true;
  lender.join();
  // Held lent: the highest-numbered threads never run a chunk.
  pool.lend(2);
  EXPECT_EQ(pool.lent(), 2);
  for (int j = 0; j < 200; ++j) {
    std::atomic<int> top{0};
    pool.parallel_for(256, [&](int64_t, int64_t, int t) {
      int seen = top.load();
      while (t > seen && !top.compare_exchange_weak(seen, t)) {}
    });
    ASSERT_LE(top.load(), 1) << "job " << j;
  }
  pool.lend(9);  // at most size() - 1: the caller always runs
  EXPECT_EQ(pool.lent(), 3);
  expect_each_item_once(pool, 500, 1);
  pool.lend(0);
  std::atomic<int> top{0};
  for (int j = 0; j < 200 && top.load() < 3; ++j)
    pool.parallel_for(4096, [&](int64_t, int64_t, int t) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      int seen = top.load();
      while (t > seen && !top.compare_exchange_weak(seen, t)) {}
    });
  EXPECT_EQ(top.load(), 3);  // returned: the last worker takes chunks again
}

TEST(ThreadPool, ShutsDownFromSpinningAndSleepingStates) {
  for (int sleep_ms : {0, 5}) {
    ThreadPool pool(4);
    expect_each_item_once(pool, 64, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }  // destructor joins the workers either way (a hang fails by the test timeout)
}

TEST(ThreadPool, OthersTakeOverAStalledThreadsShare) {
  // Whoever picks up the first chunk of the middle share stalls, as a thread does when its VM
  // loses a core; the rest of that share must be run by the others meanwhile.
  ThreadPool pool(3);
  const int64_t n = 3000;
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n)), runner(static_cast<size_t>(n));
  std::atomic<int> stalled{-1};
  std::atomic<int64_t> stalled_end{0};
  pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
    if (b == n / 3) {
      stalled = t;
      stalled_end = e;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int64_t i = b; i < e; ++i) {
      hits[size_t(i)]++;
      runner[size_t(i)] = t;
    }
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "item " << i;
  ASSERT_GE(stalled.load(), 0);
  int64_t kept = 0;  // the middle share's items after the stalled chunk that the stalled thread ran
  for (int64_t i = stalled_end; i < 2 * n / 3; ++i) kept += runner[size_t(i)] == stalled.load();
  EXPECT_LT(kept, (2 * n / 3 - stalled_end) / 2) << "the stalled thread kept most of its share";
}

TEST(ThreadPool, SmallJobsRunOnTheCaller) {
  ThreadPool pool(4);
  const auto caller = std::this_thread::get_id();
  bool on_caller = false;
  pool.parallel_for(8, [&](int64_t, int64_t, int) { on_caller = std::this_thread::get_id() == caller; }, 16);
  EXPECT_TRUE(on_caller);
}

// Per-thread state (AMX tile configuration) is set up on the thread that runs the work, before
// its first chunk: each worker once, and each calling thread once.
TEST(ThreadPool, ThreadInitRunsOnceOnEveryThreadBeforeItsWork) {
  std::mutex mu;
  std::map<std::thread::id, std::vector<int>> inits;  // thread -> indices it was initialised as
  ThreadPool pool(3, [&](int index) {
    std::lock_guard<std::mutex> lk(mu);
    inits[std::this_thread::get_id()].push_back(index);
  });
  std::atomic<int> uninitialised{0};
  auto job = [&] {
    pool.parallel_for(3000, [&](int64_t, int64_t, int t) {
      std::lock_guard<std::mutex> lk(mu);
      auto it = inits.find(std::this_thread::get_id());
      if (it == inits.end() || std::find(it->second.begin(), it->second.end(), t) == it->second.end()) ++uninitialised;
    });
  };
  for (int i = 0; i < 20; ++i) job();
  std::thread other(job);  // a second caller gets its own init, as index 0
  other.join();
  job();
  EXPECT_EQ(uninitialised.load(), 0);
  std::lock_guard<std::mutex> lk(mu);
  ASSERT_EQ(inits.size(), 4u);  // two workers and two callers
  int callers = 0;
  for (auto& [id, indices] : inits) {
    EXPECT_EQ(indices.size(), 1u) << "a thread was initialised more than once";
    callers += indices[0] == 0;
  }
  EXPECT_EQ(callers, 2);
}

}  // namespace
}  // namespace eaglet
