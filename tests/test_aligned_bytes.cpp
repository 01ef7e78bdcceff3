// Buffers of packed weights: cache-line aligned, and from 2 MiB on their own mapping on a huge
// page boundary advised for transparent huge pages (core/aligned_bytes.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "core/aligned_bytes.h"

namespace eaglet {
namespace {

// The "THPeligible" field of the /proc/self/smaps entry that holds `p` (-1 when not found).
int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s;
}

TEST(AlignedBytes, SmallBuffersStartOnACacheLine) {
  for (size_t n : {size_t(1), size_t(100), size_t(4096), kHugePage - 1}) {
    AlignedBytes b(n, 7);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kCacheLine, 0u) << n;
    EXPECT_EQ(b[n - 1], 7);
  }
}

TEST(AlignedBytes, LargeBuffersStartOnAHugePageAdvisedForHugePages) {
  if (!kHugePageBuffers) GTEST_SKIP() << "AddressSanitizer build: large buffers stay on the heap, where it checks them";
  const size_t n = 3 * kHugePage + 100;  // a partial page and a partial huge page at the end
  AlignedBytes b(n, 3);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHugePage, 0u);
  EXPECT_EQ(b[0], 3);
  EXPECT_EQ(b[n - 1], 3);
  AlignedBytes copy = b;  // copies and growth take the same path
  copy.resize(2 * n, 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.data()) % kHugePage, 0u);
  EXPECT_EQ(copy[n - 1], 3);
  EXPECT_EQ(copy[2 * n - 1], 5);
  const std::string mode = thp_mode();
  if (mode.empty() || mode.find("[never]") != std::string::npos)
    GTEST_SKIP() << "transparent huge pages are off here ('" << mode << "'): the advice cannot be checked";
  if (thp_eligible(b.data()) < 0) GTEST_SKIP() << "/proc/self/smaps has no THPeligible field on this kernel";
  EXPECT_EQ(thp_eligible(b.data()), 1) << "THP mode " << mode;
  EXPECT_EQ(thp_eligible(copy.data()), 1) << "THP mode " << mode;
}

}  // namespace
}  // namespace eaglet
