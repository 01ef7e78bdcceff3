// Jinja's filters and tests, as far as published chat templates use them (Llama 3.x, Qwen2.5/3,
// Mistral, Gemma, gpt-oss, DeepSeek, MiniMax, Phi; tests/data/chat_templates), each checked
// against Python's Jinja2 by tests/test_chat_template.cpp.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"

namespace eaglet::jinja {

namespace {
const List* list_of(const Value& v) {
  auto l = std::get_if<std::shared_ptr<List>>(&v.v);
  return l ? l->get() : nullptr;
}

// The items a filter iterates: a list's elements, a dict's keys, a string's characters (copies,
// charged as they are made).
List items_of(Budget& b, const Value& v) {
  List out;
  if (const List* l = list_of(v)) {
    for (auto& x : *l) b.charge(copy_cost(x));
    return *l;
  }
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&v.v))
    for (auto& [k, e] : **d) {
      b.charge(sizeof(Value) + k.size());
      out.push_back(Value(k));
    }
  else if (auto s = std::get_if<std::string>(&v.v))
    for (char c : *s) {
      b.charge(sizeof(Value) + 1);
      out.push_back(Value(std::string(1, c)));
    }
  return out;
}

Value make_list(Budget& b, List l) { return checked(b, Value(std::make_shared<List>(std::move(l)))); }

// `x.attr` for attribute filters; "a.b" walks nested dicts as Jinja's attribute= does.
Value attribute(const Value& x, const std::string& path) {
  Value v = x;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    auto d = std::get_if<std::shared_ptr<Dict>>(&v.v);
    if (!d) return Value();
    auto it = (*d)->find(part);
    v = it == (*d)->end() ? Value() : it->second;
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value kwarg(const Kwargs& kw, const char* name, Value fallback = Value()) {
  for (auto& [k, v] : kw)
    if (k == name) return v;
  return fallback;
}

std::string lowered(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Python's ordering for sort and dictsort: numbers by value, strings case-insensitively unless
// asked otherwise.
// (Uncharged: callers charge what their comparisons read.)
bool less(const Value& x, const Value& y, bool case_sensitive) {
  if (is_num(x) && is_num(y)) return as_double(x) < as_double(y);
  const std::string s = x.str(), t = y.str();
  return case_sensitive ? s < t : lowered(s) < lowered(t);
}

// Sorting n items compares n log n times, each reading its keys: charged before it starts.
void charge_sort(Budget& b, size_t n, uint64_t key_bytes) {
  uint64_t log = 1;
  while ((uint64_t(1) << log) < n) ++log;
  b.charge(n * log * (kCompareCost + (n ? key_bytes / n : 0)));
}

uint64_t string_bytes(const List& l) {
  uint64_t bytes = 0;
  for (auto& x : l) bytes += copy_cost(x) - sizeof(Value);
  return bytes;
}

// unique()'s notion of a repeat, as Python's hashing gives: numbers by value (1 and 1.0 are one),
// strings ignoring case unless asked, anything else by its JSON. First occurrences are found by
// sorting (key, position) pairs: std::unordered_set took 0.9 s for a million doubles.
std::vector<bool> first_occurrences(Budget& b, const List& keys, bool case_sensitive) {
  std::vector<std::pair<double, size_t>> numbers;
  std::vector<std::pair<std::string, size_t>> others;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Value& v = keys[i];
    b.charge(copy_cost(v));
    if (is_num(v)) numbers.emplace_back(as_double(v) + 0.0, i);  // +0.0: -0.0 == 0.0
    else if (auto s = std::get_if<std::string>(&v.v)) others.emplace_back("s" + (case_sensitive ? *s : lowered(*s)), i);
    else if (std::holds_alternative<Undefined>(v.v) || std::holds_alternative<std::nullptr_t>(v.v)) others.emplace_back("0", i);
    else others.emplace_back(std::to_string(v.v.index()) + to_json(b, v), i);
  }
  std::vector<bool> first(keys.size(), false);
  auto mark = [&](auto& pairs) {
    uint64_t bytes = 0;
    if constexpr (std::is_same_v<std::decay_t<decltype(pairs[0].first)>, std::string>)
      for (auto& p : pairs) bytes += p.first.size();
    charge_sort(b, pairs.size(), bytes);
    std::sort(pairs.begin(), pairs.end());
    for (size_t i = 0; i < pairs.size(); ++i)
      if (i == 0 || pairs[i].first != pairs[i - 1].first) first[pairs[i].second] = true;
  };
  mark(numbers);
  mark(others);
  return first;
}

std::string cased(std::string s, bool title) {
  bool start = true;
  for (auto& ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    ch = char(start ? std::toupper(c) : std::tolower(c));
    start = title ? !std::isalnum(c) : false;
  }
  return s;
}
}  // namespace

namespace {
Value join(Budget& b, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  const List l = items_of(b, v);
  const std::string sep = args.empty() ? "" : args[0].str();
  const Value attr = kwarg(kwargs, "attribute", args.size() > 1 ? args[1] : Value());
  std::string o;
  for (size_t i = 0; i < l.size(); ++i) {
    const std::string piece = (attr.is_undefined() ? l[i] : attribute(l[i], attr.str())).str();
    const size_t add = (i ? sep.size() : 0) + piece.size();
    Budget::fits(o.size() + add, "a joined string");  // before the append: sep may be 16 MB
    b.charge(add);
    if (i) o += sep;
    o += piece;
  }
  return Value(o);
}

Value unique(Budget& b, const Value& v, const Kwargs& kwargs, const std::vector<Value>& args) {
  const bool cs = kwarg(kwargs, "case_sensitive", args.empty() ? Value(false) : args[0]).truthy();
  const Value attr = kwarg(kwargs, "attribute", args.size() > 1 ? args[1] : Value());
  const List items = items_of(b, v);
  List keys;
  if (!attr.is_undefined())
    for (auto& x : items) keys.push_back(attribute(x, attr.str()));
  const std::vector<bool> first = first_occurrences(b, attr.is_undefined() ? items : keys, cs);
  List out;
  for (size_t i = 0; i < items.size(); ++i)
    if (first[i]) out.push_back(items[i]);
  return make_list(b, std::move(out));
}

Value sorted(Budget& b, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  List l = items_of(b, v);
  const Value attr = kwarg(kwargs, "attribute");
  const bool rev = kwarg(kwargs, "reverse", args.empty() ? Value() : args[0]).truthy();
  const bool cs = kwarg(kwargs, "case_sensitive", args.size() > 1 ? args[1] : Value()).truthy();
  auto key = [&](const Value& x) { return attr.is_undefined() ? x : attribute(x, attr.str()); };
  charge_sort(b, l.size(), string_bytes(l));
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) { return rev ? less(key(y), key(x), cs) : less(key(x), key(y), cs); });
  return make_list(b, std::move(l));
}

Value dictsorted(Budget& b, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  auto d = std::get_if<std::shared_ptr<Dict>>(&v.v);
  if (!d) fail("chat template: dictsort needs a mapping");
  List l;
  for (auto& [k, e] : **d) {
    b.charge(sizeof(Value) * 2 + k.size() + copy_cost(e));
    l.push_back(Value(std::make_shared<List>(List{Value(k), e})));
  }
  // dictsort(case_sensitive=False, by='key', reverse=False)
  const bool cs = kwarg(kwargs, "case_sensitive", args.empty() ? Value() : args[0]).truthy();
  const bool by_value = kwarg(kwargs, "by", args.size() > 1 ? args[1] : Value()).str() == "value";
  const bool rev = kwarg(kwargs, "reverse", args.size() > 2 ? args[2] : Value()).truthy();
  auto key = [&](const Value& pair) { return (*list_of(pair))[by_value ? 1 : 0]; };
  charge_sort(b, l.size(), string_bytes(l));
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) { return rev ? less(key(y), key(x), cs) : less(key(x), key(y), cs); });
  return make_list(b, std::move(l));
}

Value selected(Budget& b, const std::string& name, const Value& v, const std::vector<Value>& args) {
  // select(test, args...) / selectattr(attr[, test, args...]): without a test, truthiness.
  const bool attr = name.ends_with("attr"), keep = name.starts_with("select");
  const size_t t = attr ? 1 : 0;
  const std::string test = args.size() > t ? args[t].str() : "";
  const std::vector<Value> test_args(args.size() > t + 1 ? args.begin() + long(t) + 1 : args.end(), args.end());
  List out;
  for (auto& x : items_of(b, v)) {
    const Value subject = attr ? attribute(x, args.empty() ? "" : args[0].str()) : x;
    const bool pass = test.empty() ? subject.truthy() : apply_test(b, test, subject, test_args);
    if (pass == keep) out.push_back(x);
  }
  return make_list(b, std::move(out));
}

Value mapped(Budget& b, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  // map(attribute='x'[, default=...]) or map('filter', args...)
  const Value attr = kwarg(kwargs, "attribute");
  if (attr.is_undefined() && args.empty()) fail("chat template: map needs a filter name or attribute=");
  List out;
  for (auto& x : items_of(b, v)) {
    if (!attr.is_undefined()) {
      Value a = attribute(x, attr.str());
      out.push_back(a.is_undefined() ? kwarg(kwargs, "default") : a);
      b.charge(copy_cost(out.back()));
    } else {
      out.push_back(apply_filter(b, args[0].str(), x, std::vector<Value>(args.begin() + 1, args.end())));
    }
  }
  return make_list(b, std::move(out));
}

Value aggregate(Budget& b, const std::string& name, const Value& v) {
  const List l = items_of(b, v);
  if (name == "sum") {
    bool flt = false;
    int64_t i = 0;
    double d = 0;
    for (auto& x : l) {
      flt |= std::holds_alternative<double>(x.v);
      if (!flt) i = checked_arith('+', i, as_int(x));
      d += as_double(x);
    }
    return flt ? Value(d) : Value(i);
  }
  if (l.empty()) return Value();
  for (auto& x : l) b.charge(copy_cost(x));  // what the comparisons read
  return *std::min_element(l.begin(), l.end(), [&](const Value& x, const Value& y) { return name == "min" ? less(x, y, false) : less(y, x, false); });
}

Value indented(Budget& b, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  // indent(width=4, first=False, blank=False)
  const int64_t width = as_int(kwarg(kwargs, "width", args.empty() ? Value(int64_t(4)) : args[0]));
  const bool first = kwarg(kwargs, "first", args.size() > 1 ? args[1] : Value()).truthy();
  const bool blank = kwarg(kwargs, "blank", args.size() > 2 ? args[2] : Value()).truthy();
  if (width < 0 || width > 1024) fail("chat template: indent width {} is outside 0..1024", width);
  const std::string pad(size_t(width), ' '), s = v.str();
  std::string out;
  size_t start = 0;
  for (bool line0 = true;; line0 = false) {
    const size_t nl = s.find('\n', start);
    const size_t len = (nl == std::string::npos ? s.size() : nl) - start;
    const bool padded = (!line0 || first) && (blank || len > 0);
    Budget::fits(out.size() + len + 1 + (padded ? pad.size() : 0), "an indented string");
    b.charge(len + 1 + (padded ? pad.size() : 0));
    if (padded) out += pad;
    out.append(s, start, len);
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return Value(out);
}

std::string cased_string(Budget& b, const Value& v, const std::string& name) {
  std::string o = v.str();
  b.charge(o.size());
  if (name == "capitalize" || name == "title") return cased(o, name == "title");
  for (auto& ch : o) ch = char(name == "upper" ? std::toupper(static_cast<unsigned char>(ch)) : std::tolower(static_cast<unsigned char>(ch)));
  return o;
}
}  // namespace

Value apply_filter(Budget& b, const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  auto arg = [&](size_t i) { return i < args.size() ? args[i] : Value(); };
  if (name == "trim") {
    std::string s = v.str();
    b.charge(s.size());
    return Value(strip_chars(std::move(s), "", true, true));
  }
  if (name == "length" || name == "count") return Value(int64_t(length(v)));
  if (name == "tojson") {
    const Value indent = kwarg(kwargs, "indent", arg(0));
    return Value(to_json(b, v, indent.is_undefined() || std::holds_alternative<std::nullptr_t>(indent.v) ? -1 : as_int(indent)));
  }
  if (name == "string") return Value(v.str());
  if (name == "safe" || name == "e" || name == "escape") return v;  // chat templates run without autoescape
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") return Value(cased_string(b, v, name));
  if (name == "default" || name == "d") {
    const bool boolean = kwarg(kwargs, "boolean", arg(1)).truthy();
    return v.is_undefined() || (boolean && !v.truthy()) ? (args.empty() ? Value("") : args[0]) : v;
  }
  if (name == "first" || name == "last") {  // without copying the rest
    if (const List* l = list_of(v)) return l->empty() ? Value() : name == "first" ? l->front() : l->back();
    const List l = items_of(b, v);
    if (l.empty()) return Value();
    return name == "first" ? l.front() : l.back();
  }
  if (name == "join") return join(b, v, args, kwargs);
  if (name == "int") return Value(std::holds_alternative<std::string>(v.v) ? int64_t(std::atoll(v.str().c_str())) : as_int(v));
  if (name == "float") return Value(std::holds_alternative<std::string>(v.v) ? std::atof(v.str().c_str()) : as_double(v));
  if (name == "abs") {
    if (std::holds_alternative<double>(v.v)) return Value(std::fabs(as_double(v)));
    return Value(as_int(v) < 0 ? checked_arith('-', 0, as_int(v)) : as_int(v));
  }
  if (name == "list") return make_list(b, items_of(b, v));
  if (name == "reverse") {
    if (auto s = std::get_if<std::string>(&v.v)) {
      b.charge(s->size());
      return Value(std::string(s->rbegin(), s->rend()));
    }
    List l = items_of(b, v);
    std::reverse(l.begin(), l.end());
    return make_list(b, std::move(l));
  }
  if (name == "unique") return unique(b, v, kwargs, args);
  if (name == "sort") return sorted(b, v, args, kwargs);
  if (name == "dictsort") return dictsorted(b, v, args, kwargs);
  if (name == "items") {
    if (!std::holds_alternative<std::shared_ptr<Dict>>(v.v)) fail("chat template: items needs a mapping");
    return call_method(b, v, "items", {});
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") return selected(b, name, v, args);
  if (name == "map") return mapped(b, v, args, kwargs);
  if (name == "sum" || name == "min" || name == "max") return aggregate(b, name, v);
  if (name == "indent") return indented(b, v, args, kwargs);
  if (name == "replace") return call_method(b, v, "replace", args);
  if (name == "round") {
    const double x = as_double(v), p = std::pow(10.0, double(args.empty() ? 0 : as_int(args[0])));
    return Value(std::round(x * p) / p);
  }
  if (name == "wordcount") return Value(int64_t(length(call_method(b, v, "split", {}))));
  fail("chat template: unknown filter '{}'", name);
}

bool apply_test(Budget& b, const std::string& name, const Value& v, const std::vector<Value>& args) {
  auto arg = [&](size_t i) { return i < args.size() ? args[i] : Value(); };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return std::holds_alternative<std::nullptr_t>(v.v);
  if (name == "string") return std::holds_alternative<std::string>(v.v);
  if (name == "number") return is_num(v);
  if (name == "integer") return std::holds_alternative<int64_t>(v.v);
  if (name == "float") return std::holds_alternative<double>(v.v);
  if (name == "boolean") return std::holds_alternative<bool>(v.v);
  if (name == "true") return std::holds_alternative<bool>(v.v) && std::get<bool>(v.v);
  if (name == "false") return std::holds_alternative<bool>(v.v) && !std::get<bool>(v.v);
  if (name == "mapping") return std::holds_alternative<std::shared_ptr<Dict>>(v.v);
  if (name == "sequence" || name == "iterable")
    return std::holds_alternative<std::shared_ptr<List>>(v.v) || std::holds_alternative<std::string>(v.v) ||
           (name == "iterable" && std::holds_alternative<std::shared_ptr<Dict>>(v.v));
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equal(b, v, arg(0));
  if (name == "ne" || name == "!=") return !equal(b, v, arg(0));
  if (name == "gt" || name == ">" || name == "lt" || name == "<" || name == "ge" || name == ">=" || name == "le" || name == "<=") {
    b.charge(copy_cost(v) + copy_cost(arg(0)));
    if (name == "gt" || name == ">") return less(arg(0), v, true);
    if (name == "lt" || name == "<") return less(v, arg(0), true);
    if (name == "ge" || name == ">=") return !less(v, arg(0), true);
    return !less(arg(0), v, true);
  }
  if (name == "in") return contains(b, arg(0), v);
  if (name == "divisibleby") return as_int(arg(0)) != 0 && as_int(v) % as_int(arg(0)) == 0;
  if (name == "even" || name == "odd") return (as_int(v) % 2 == 0) == (name == "even");
  if (name == "lower" || name == "upper") {
    const std::string s = v.str();
    b.charge(s.size());
    return std::none_of(s.begin(), s.end(), [&](char c) { return name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c)); });
  }
  fail("chat template: unknown test '{}'", name);
}

bool contains(Budget& b, const Value& container, const Value& x) {
  if (auto s = std::get_if<std::string>(&container.v)) {
    b.charge(s->size());
    return s->find(x.str()) != std::string::npos;
  }
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&container.v)) {  // keys are strings
    b.charge(kCompareCost * ((*d)->size() + 1));
    auto key = std::get_if<std::string>(&x.v);
    return key && (*d)->count(*key) != 0;
  }
  if (const List* l = list_of(container))  // compared in place: no copy of the list per test
    return std::any_of(l->begin(), l->end(), [&](const Value& y) { return equal(b, y, x); });
  return false;
}

}  // namespace eaglet::jinja
