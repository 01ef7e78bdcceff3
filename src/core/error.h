// One exception type for everything the user can get wrong (files, configs, requests): its
// message is a single line that names the file, field or tensor at fault.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace eaglet {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

#define EAGLET_CHECK(cond, ...)        \
  do {                                 \
    if (!(cond)) ::eaglet::fail(__VA_ARGS__); \
  } while (0)

}  // namespace eaglet
