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

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
};

using AlignedBytes = std::vector<uint8_t, CacheLineAllocator<uint8_t>>;

}  // namespace eaglet
