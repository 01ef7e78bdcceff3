#include "core/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/aligned_bytes.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace eaglet {

namespace {

// One cache line. The read loops use the widest loads the CPU has: with narrower ones a single
// core cannot keep enough misses in flight and the probe would understate the memory (by ~25%
// on a Zen core, compared with SSE2 loads).
using Line = uint64_t __attribute__((vector_size(64)));

// Sums `n` lines as `kStreams` interleaved sequential streams: a matvec reads several weight rows
// at once, and on some machines several streams per core read faster than one.
template <int kStreams>
inline __attribute__((always_inline)) uint64_t sum_lines(const Line* a, int64_t n) {
  const int64_t per = n / kStreams;
  Line acc[kStreams] = {};
  for (int64_t i = 0; i < per; ++i)
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s) acc[s] += a[s * per + i];
  for (int64_t i = per * kStreams; i < n; ++i) acc[0] += a[i];
  Line t = {};
  for (int s = 0; s < kStreams; ++s) t += acc[s];
  uint64_t total = 0;
  for (int j = 0; j < 8; ++j) total += t[j];
  return total;
}

using SumFn = uint64_t (*)(const Line*, int64_t);

// GCC compiles the probe loops at -O3 whatever the build type; clang has no such attribute.
#if defined(__clang__)
#define EAGLET_PROBE_OPT
#else
#define EAGLET_PROBE_OPT optimize("O3")
#endif

template <int kStreams>
__attribute__((target("avx512f"), EAGLET_PROBE_OPT)) uint64_t sum_avx512(const Line* a, int64_t n) {
  return sum_lines<kStreams>(a, n);
}
template <int kStreams>
__attribute__((target("avx2"), EAGLET_PROBE_OPT)) uint64_t sum_avx2(const Line* a, int64_t n) {
  return sum_lines<kStreams>(a, n);
}
template <int kStreams>
__attribute__((EAGLET_PROBE_OPT)) uint64_t sum_generic(const Line* a, int64_t n) {
  return sum_lines<kStreams>(a, n);
}

template <int kStreams>
SumFn sum_for_cpu() {
  const Isa isa = best_supported_isa();
  if (isa >= Isa::Avx512) return sum_avx512<kStreams>;
  if (isa >= Isa::Avx2) return sum_avx2<kStreams>;
  return sum_generic<kStreams>;
}

// Probe arrays live in the same kind of memory as packed weights and weights read with --no-mmap
// (map_huge: huge pages where granted): on this project's VMs a plain heap allocation of the same
// size measured 20% slower, which would flatter every fraction computed against it.
class AnonymousArray {
 public:
  explicit AnonymousArray(int64_t lines) : bytes_(size_t(lines) * sizeof(Line)) {
    try {
      data_ = static_cast<Line*>(map_huge(bytes_));
    } catch (const std::bad_alloc&) {
      fail("memory bandwidth probe: cannot map {} bytes", bytes_);
    }
  }
  ~AnonymousArray() { unmap_huge(data_, bytes_); }
  AnonymousArray(const AnonymousArray&) = delete;
  AnonymousArray& operator=(const AnonymousArray&) = delete;
  Line* operator+(int64_t i) const { return data_ + i; }

 private:
  size_t bytes_;
  Line* data_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

MemoryBandwidth measure_memory_bandwidth(ThreadPool& pool, int megabytes, int repeats) {
  const int64_t lines = int64_t(megabytes) * (1 << 20) / int64_t(sizeof(Line));
  AnonymousArray a(lines), b(lines);
  pool.parallel_for(lines, [&](int64_t s, int64_t e, int) {  // first touch on the threads that read
    std::memset(static_cast<void*>(a + s), 1, size_t(e - s) * sizeof(Line));
    std::memset(static_cast<void*>(b + s), 0, size_t(e - s) * sizeof(Line));
  });
  const SumFn readers[] = {sum_for_cpu<1>(), sum_for_cpu<4>()};
  std::vector<uint64_t> sums(size_t(pool.size()));
  const double bytes = double(lines) * sizeof(Line);
  MemoryBandwidth best;
  for (int r = 0; r < repeats; ++r)
    for (SumFn read : readers) {
      const auto t0 = std::chrono::steady_clock::now();
      pool.parallel_for(lines, [&](int64_t s, int64_t e, int tid) { sums[size_t(tid)] += read(a + s, e - s); });
      best.read_gbps = std::max(best.read_gbps, bytes / seconds_since(t0) / 1e9);
    }
  // Copies after all reads: their dirty lines would otherwise be written back during a read pass.
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(lines, [&](int64_t s, int64_t e, int) {
      std::memcpy(static_cast<void*>(b + s), a + s, size_t(e - s) * sizeof(Line));
    });
    best.copy_gbps = std::max(best.copy_gbps, 2 * bytes / seconds_since(t0) / 1e9);
  }
  volatile uint64_t sink = sums[0] + (*(b + lines / 2))[0];  // keeps the reads alive
  (void)sink;
  return best;
}

}  // namespace eaglet
