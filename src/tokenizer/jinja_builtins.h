// The built-ins of the Jinja subset (see jinja.h): value helpers, string/dict methods,
// functions, filters and tests. Internal to tokenizer/; jinja.cpp is the language around them.
#pragma once
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

// `v`, after checking a string or list it holds against kMaxBytes / kMaxItems.
Value checked(Value v);
// Integer + - * with overflow reported as an error.
int64_t checked_arith(char op, int64_t x, int64_t y);
// Whether `v` is or contains the dict `d` (a namespace must not come to hold itself).
bool reaches(const Value& v, const Dict* d, int depth = 0);

// Python's json.dumps(x, ensure_ascii=False[, indent=N]) layout.
std::string to_json(const Value& v, int indent = -1);
int64_t as_int(const Value& v);
bool is_num(const Value& v);
double as_double(const Value& v);
bool equal(const Value& a, const Value& b);
size_t length(const Value& v);
std::string strip_chars(std::string s, const std::string& chars, bool left, bool right);
Value subscript(const Value& base, const Value& key);

Value call_method(const Value& self, const std::string& name, const std::vector<Value>& a);
bool is_builtin_function(const std::string& name);
Value call_function(const std::string& fn, const std::vector<Value>& a,
                    const std::vector<std::pair<std::string, Value>>& kwargs);
using Kwargs = std::vector<std::pair<std::string, Value>>;
// Filters and tests (jinja_filters.cpp). Filters that apply a test (select, selectattr, ...) name
// it as their argument, as Jinja's do.
Value apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs = {});
bool apply_test(const std::string& name, const Value& v, const std::vector<Value>& args = {});

}  // namespace eaglet::jinja
