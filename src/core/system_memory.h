// What the operating system says about memory: how much is available for new allocations (sizes
// the default KV cache) and how much this process holds (the soak test and /metrics watch it).
#pragma once
#include <cstdint>

namespace eaglet {

// MemAvailable from /proc/meminfo (free plus reclaimable); 0 when it cannot be read.
int64_t available_memory_bytes();
// The process's resident set (VmRSS); 0 when it cannot be read.
int64_t resident_memory_bytes();

}  // namespace eaglet
