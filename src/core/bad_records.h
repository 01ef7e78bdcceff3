// Malformed records that a data loader skips instead of aborting a long job: each is counted
// and the first few are kept for the log; more than `limit` means a wrong file rather than a few
// bad lines, and is an error naming the count and the first one.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"

namespace eaglet {

class BadRecords {
 public:
  explicit BadRecords(int limit) : limit_(limit) {}
  // `why`: the loader's error for one record (it names the file and line or index).
  void skip(const std::string& why) {
    if (first_.size() < 5) first_.push_back(why);
    if (++count_ > limit_)
      fail("more than {} malformed records (data.max_bad_records); the first: {}", limit_, first_.front());
  }
  int count() const { return count_; }
  const std::vector<std::string>& first() const { return first_; }

 private:
  int limit_, count_ = 0;
  std::vector<std::string> first_;
};

// Runs `f` for one record: an eaglet::Error is counted in `bad` (when given) or propagates.
template <class F>
void per_record(BadRecords* bad, F&& f) {
  if (!bad) return f();
  try {
    f();
  } catch (const Error& e) {
    bad->skip(e.what());
  }
}

}  // namespace eaglet
