// The built-ins of the Jinja subset (see jinja.h): value helpers, string/dict methods,
// functions, filters and tests. Internal to tokenizer/; jinja.cpp is the language around them.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja.h"

namespace eaglet::jinja {

// Python's json.dumps(x, ensure_ascii=False) layout: ", " and ": " separators.
std::string to_json(const Value& v);
int64_t as_int(const Value& v);
bool is_num(const Value& v);
double as_double(const Value& v);
bool equal(const Value& a, const Value& b);
size_t length(const Value& v);
std::string strip_chars(std::string s, const std::string& chars, bool left, bool right);
Value subscript(const Value& base, const Value& key);

Value call_method(const Value& self, const std::string& name, const std::vector<Value>& a);
Value call_function(const std::string& fn, const std::vector<Value>& a,
                    const std::vector<std::pair<std::string, Value>>& kwargs);
Value apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args);
bool apply_test(const std::string& name, const Value& v);

}  // namespace eaglet::jinja
