// Byte buffers that start on a cache line. Packed weights are read in 64-byte rows (an AMX tile
// row, a ZMM load); glibc hands large allocations out 16 bytes into a page, so every such row of
// a std::vector's buffer straddled two lines: twice the cache accesses per tile load (on the Intel
// Xeon AMX VM a 1.5 MB BF16 matrix in L2 took 29 us at M = 1 and 75 us at M = 32, aligned 15 and
// 55 us).
//
// Buffers of 2 MiB and more (packed weights, the bandwidth probe, files read into memory) get
// their own anonymous mapping that starts on a 2 MiB boundary and is advised for transparent
// huge pages. glibc maps large blocks with 4 KB pages, and streaming weights from them costs a
// page walk every 4 KB (nested, in a VM) and restarts the hardware prefetchers at every page: on
// the 2-core Intel Xeon AMX VM the M = 1 matmuls ran 5-20% faster on huge pages
// (docs/performance.md, "Huge pages for packed weights").
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace eaglet {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kHugePage = size_t(2) << 20;

// An anonymous read-write mapping of `bytes` (at least one byte) starting on a kHugePage
// boundary, advised for huge pages (the kernel grants them where THP is `madvise` or `always`).
// Throws std::bad_alloc when the system refuses the mapping.
void* map_huge(size_t bytes);
void unmap_huge(void* p, size_t bytes);

// Under AddressSanitizer large buffers stay on the heap too, where overflows are caught.
#if defined(__SANITIZE_ADDRESS__)
#define EAGLET_HEAP_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EAGLET_HEAP_ONLY 1
#endif
#endif
#ifdef EAGLET_HEAP_ONLY
inline constexpr bool kHugePageBuffers = false;
#else
inline constexpr bool kHugePageBuffers = true;
#endif

// Allocates on `Align`-byte boundaries (a power of two up to kHugePage): cache lines, or pages
// for weights read as the engine places them; from kHugePage bytes on, through map_huge.
template <class T, size_t Align = kCacheLine>
struct AlignedAllocator {
  static_assert(Align <= kHugePage);
  using value_type = T;
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, Align>;
  };
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, Align>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (kHugePageBuffers && bytes >= kHugePage) return static_cast<T*>(map_huge(bytes));
    return static_cast<T*>(::operator new(bytes, std::align_val_t(Align)));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (kHugePageBuffers && bytes >= kHugePage) return unmap_huge(p, bytes);
    ::operator delete(p, std::align_val_t(Align));
  }
  template <class U>
  bool operator==(const AlignedAllocator<U, Align>&) const { return true; }
};
template <class T>
using CacheLineAllocator = AlignedAllocator<T, kCacheLine>;

using AlignedBytes = std::vector<uint8_t, CacheLineAllocator<uint8_t>>;

}  // namespace eaglet
