// Byte buffers that start on a cache line. Packed weights are read in 64-byte rows (an AMX tile
// row, a ZMM load); glibc hands large allocations out 16 bytes into a page, so every such row of
// a std::vector's buffer straddled two lines: twice the cache accesses per tile load (on the Intel
// Xeon AMX VM a 1.5 MB BF16 matrix in L2 took 29 us at M = 1 and 75 us at M = 32, aligned 15 and
// 55 us).
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace eaglet {

inline constexpr size_t kCacheLine = 64;

// Allocates on `Align`-byte boundaries (a power of two): cache lines, or pages for weights read
// as the engine places them.
template <class T, size_t Align = kCacheLine>
struct AlignedAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, Align>;
  };
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, Align>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(Align))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(Align)); }
  template <class U>
  bool operator==(const AlignedAllocator<U, Align>&) const { return true; }
};
template <class T>
using CacheLineAllocator = AlignedAllocator<T, kCacheLine>;

using AlignedBytes = std::vector<uint8_t, CacheLineAllocator<uint8_t>>;

}  // namespace eaglet
