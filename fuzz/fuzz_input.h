// What the harnesses share: an in-memory file for the parsers that take a path (rewritten for
// each input, never touching the disk), and the rule every harness checks, that bad input only
// ever raises eaglet::Error; anything else escaping (std::bad_alloc, a JSON type error, a crash)
// is a finding.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace eaglet::fuzz {

class MemFile {
 public:
  MemFile() : fd_(::memfd_create("eaglet-fuzz", 0)), path_("/proc/self/fd/" + std::to_string(fd_)) {
    if (fd_ < 0) std::abort();
  }
  const std::string& path() const { return path_; }
  void set(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 || (size && ::pwrite(fd_, data, size, 0) != ssize_t(size))) std::abort();
  }

 private:
  int fd_;
  std::string path_;
};

// Runs `f`; eaglet::Error is the expected answer to bad input.
template <typename F>
void expect_only_errors(F&& f) {
  try {
    f();
  } catch (const eaglet::Error&) {
  }
}

}  // namespace eaglet::fuzz
