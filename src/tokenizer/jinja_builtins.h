// The built-ins of the Jinja subset (see jinja.h): value helpers, string/dict methods,
// functions, filters and tests. Internal to tokenizer/; jinja.cpp is the language around them.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja.h"

namespace eaglet::jinja {

// Any template must render in bounded time and memory (templates come with model files, and
// every chat request renders one): past these limits rendering fails with eaglet::Error.
inline constexpr size_t kMaxBytes = 16 << 20;     // a string value, and the whole output
inline constexpr int64_t kMaxItems = 1 << 20;     // a list (range(), concatenation, ...)
inline constexpr int64_t kMaxSteps = 1'000'000;   // nodes rendered plus loop iterations (~1 s)
inline constexpr int kMaxNesting = 128;           // expression and block nesting
inline constexpr size_t kMaxTokens = 4096;        // tokens in one {{ }} or {% %}
// Work of one render, in units of about a byte copied: a value made or copied costs its size (so
// the memory a render can hold is bounded too, ~256 MB), a comparison or lookup kCompareCost plus
// the bytes it reads. About a second of work at most.
inline constexpr uint64_t kMaxWork = uint64_t(256) << 20;
inline constexpr uint64_t kCompareCost = 4;

// What one render may still spend. Every operation charges the work it does as it does it (a
// `replace` its input and output bytes, an `in` the items it compares, a copy the bytes it
// copies), so no construct escapes the limits however it is nested; the deadline and the cancel
// flag are checked every megabyte of work and every 4096 steps.
class Budget {
 public:
  explicit Budget(const RenderLimits& limits);
  ~Budget() {
    if (report_) *report_ = work_;
  }
  void charge(uint64_t units) {
    work_ += units;
    if (work_ >= next_check_) check();
  }
  void step();  // one node rendered or one loop iteration
  // Fails unless a string of `n` bytes fits kMaxBytes (before it is built).
  static void fits(size_t n, const char* what);

 private:
  void check();
  uint64_t work_ = 0, next_check_ = 0;
  int64_t steps_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  const std::atomic<bool>* cancel_;
  double max_seconds_;
  uint64_t* report_;
};

// What copying `v` costs: its bytes for a string (a deep copy), sizeof(Value) for anything else
// (lists and dicts are shared, not copied).
uint64_t copy_cost(const Value& v);

// `v`, after checking a string or list it holds against kMaxBytes / kMaxItems and charging its
// copy to `b`.
Value checked(Budget& b, Value v);
// Integer + - * with overflow reported as an error.
int64_t checked_arith(char op, int64_t x, int64_t y);
// Whether `v` is or contains the dict `d` (a namespace must not come to hold itself).
bool reaches(const Value& v, const Dict* d, int depth = 0);

// Python's json.dumps(x, ensure_ascii=False[, indent=N]) layout.
std::string to_json(Budget& b, const Value& v, int64_t indent = -1);
int64_t as_int(const Value& v);
bool is_num(const Value& v);
double as_double(const Value& v);
bool equal(Budget& b, const Value& a, const Value& b2);
size_t length(const Value& v);
std::string strip_chars(std::string s, const std::string& chars, bool left, bool right);
Value subscript(Budget& b, const Value& base, const Value& key);

Value call_method(Budget& b, const Value& self, const std::string& name, const std::vector<Value>& a);
bool is_builtin_function(const std::string& name);
using Kwargs = std::vector<std::pair<std::string, Value>>;
Value call_function(Budget& b, const std::string& fn, const std::vector<Value>& a, const Kwargs& kwargs);
// Filters and tests (jinja_filters.cpp). Filters that apply a test (select, selectattr, ...) name
// it as their argument, as Jinja's do.
Value apply_filter(Budget& b, const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs = {});
bool apply_test(Budget& b, const std::string& name, const Value& v, const std::vector<Value>& args = {});
// Python's `x in container` for strings (substring), dicts (keys) and lists (items).
bool contains(Budget& b, const Value& container, const Value& x);

}  // namespace eaglet::jinja
