#include "core/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"

namespace eaglet {

__attribute__((optimize("O3"))) MemoryBandwidth measure_memory_bandwidth(ThreadPool& pool, int megabytes, int repeats) {
  const size_t n = size_t(megabytes) * (1 << 20) / sizeof(uint64_t);
  std::vector<uint64_t> a(n), b(n);
  pool.parallel_for(int64_t(n), [&](int64_t s, int64_t e, int) {  // first touch on the threads that read
    for (int64_t i = s; i < e; ++i) a[size_t(i)] = uint64_t(i);
    std::memset(&b[size_t(s)], 0, size_t(e - s) * sizeof(uint64_t));
  });
  using clock = std::chrono::steady_clock;
  MemoryBandwidth best;
  std::vector<uint64_t> sums(size_t(pool.size()));
  for (int r = 0; r < repeats; ++r) {
    auto t0 = clock::now();
    pool.parallel_for(int64_t(n), [&](int64_t s, int64_t e, int tid) {
      uint64_t acc[8] = {0};
      int64_t i = s;
      for (; i + 8 <= e; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[size_t(i + j)];
      for (; i < e; ++i) acc[0] += a[size_t(i)];
      uint64_t total = 0;
      for (auto v : acc) total += v;
      sums[size_t(tid)] += total;  // keeps the reads alive
    });
    const double read_s = std::chrono::duration<double>(clock::now() - t0).count();
    t0 = clock::now();
    pool.parallel_for(int64_t(n), [&](int64_t s, int64_t e, int) {
      std::memcpy(&b[size_t(s)], &a[size_t(s)], size_t(e - s) * sizeof(uint64_t));
    });
    const double copy_s = std::chrono::duration<double>(clock::now() - t0).count();
    const double bytes = double(n * sizeof(uint64_t));
    best.read_gbps = std::max(best.read_gbps, bytes / read_s / 1e9);
    best.copy_gbps = std::max(best.copy_gbps, 2 * bytes / copy_s / 1e9);
  }
  volatile uint64_t sink = sums[0] + b[n / 2];
  (void)sink;
  return best;
}

}  // namespace eaglet
