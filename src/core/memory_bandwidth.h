// A STREAM-like probe of this machine's memory bandwidth, measured with the same thread pool
// the kernels use, so decode speed can be reported as a fraction of what the memory delivers.
#pragma once

namespace eaglet {

class ThreadPool;

struct MemoryBandwidth {
  double read_gbps = 0;  // bytes read per second: the best of one and four streams per thread
  double copy_gbps = 0;  // STREAM "copy" convention: bytes read + bytes written per second
};

// Best of `repeats` passes over arrays of `megabytes` (well beyond the last-level cache).
MemoryBandwidth measure_memory_bandwidth(ThreadPool& pool, int megabytes = 512, int repeats = 5);

}  // namespace eaglet
