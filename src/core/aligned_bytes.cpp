#include "core/aligned_bytes.h"

#include <sys/mman.h>
#include <unistd.h>

namespace eaglet {

namespace {
size_t page_rounded(size_t bytes) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}
}  // namespace

// Maps kHugePage more than asked and unmaps the unaligned head and the tail, so the mapping is
// exactly the rounded length: no huge page is spent on a tail that nothing uses (the last
// partial 2 MiB keeps 4 KB pages).
void* map_huge(size_t bytes) {
  const size_t length = page_rounded(bytes), span = length + kHugePage;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage, end = start + length;
  if (start > base) ::munmap(p, start - base);
  if (base + span > end) ::munmap(reinterpret_cast<void*>(end), base + span - end);
  // Only a hint: where THP is off or unsupported the mapping keeps small pages.
  ::madvise(reinterpret_cast<void*>(start), length, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void unmap_huge(void* p, size_t bytes) { ::munmap(p, page_rounded(bytes)); }

}  // namespace eaglet
