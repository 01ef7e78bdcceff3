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

// The items a filter iterates: a list's elements, a dict's keys, a string's characters.
List items_of(const Value& v) {
  if (const List* l = list_of(v)) return *l;
  List out;
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&v.v))
    for (auto& [k, e] : **d) out.push_back(Value(k));
  else if (auto s = std::get_if<std::string>(&v.v))
    for (char c : *s) out.push_back(Value(std::string(1, c)));
  return out;
}

Value make_list(List l) { return checked(Value(std::make_shared<List>(std::move(l)))); }

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

// Python's ordering for sort and dictsort: numbers by value, strings case-insensitively unless
// asked otherwise.
bool less(const Value& a, const Value& b, bool case_sensitive) {
  if (is_num(a) && is_num(b)) return as_double(a) < as_double(b);
  std::string x = a.str(), y = b.str();
  if (!case_sensitive) {
    for (auto& c : x) c = char(std::tolower(static_cast<unsigned char>(c)));
    for (auto& c : y) c = char(std::tolower(static_cast<unsigned char>(c)));
  }
  return x < y;
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

Value apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs) {
  auto arg = [&](size_t i) { return i < args.size() ? args[i] : Value(); };
  if (name == "trim") return Value(strip_chars(v.str(), "", true, true));
  if (name == "length" || name == "count") return Value(int64_t(length(v)));
  if (name == "tojson") {
    const Value indent = kwarg(kwargs, "indent", arg(0));
    return Value(to_json(v, indent.is_undefined() || std::holds_alternative<std::nullptr_t>(indent.v) ? -1 : int(as_int(indent))));
  }
  if (name == "string") return Value(v.str());
  if (name == "safe" || name == "e" || name == "escape") return v;  // chat templates run without autoescape
  if (name == "upper" || name == "lower") {
    std::string o = v.str();
    for (auto& ch : o) ch = char(name == "upper" ? std::toupper(static_cast<unsigned char>(ch)) : std::tolower(static_cast<unsigned char>(ch)));
    return Value(o);
  }
  if (name == "capitalize" || name == "title") return Value(cased(v.str(), name == "title"));
  if (name == "default" || name == "d") {
    const bool boolean = kwarg(kwargs, "boolean", arg(1)).truthy();
    return v.is_undefined() || (boolean && !v.truthy()) ? (args.empty() ? Value("") : args[0]) : v;
  }
  if (name == "first" || name == "last") {
    const List l = items_of(v);
    if (l.empty()) return Value();
    return name == "first" ? l.front() : l.back();
  }
  if (name == "join") {
    const List l = items_of(v);
    const std::string sep = args.empty() ? "" : args[0].str();
    const Value attr = kwarg(kwargs, "attribute", arg(1));
    std::string o;
    for (size_t i = 0; i < l.size(); ++i) o += (i ? sep : "") + (attr.is_undefined() ? l[i] : attribute(l[i], attr.str())).str();
    return checked(Value(o));
  }
  if (name == "int") return Value(std::holds_alternative<std::string>(v.v) ? int64_t(std::atoll(v.str().c_str())) : as_int(v));
  if (name == "float") return Value(std::holds_alternative<std::string>(v.v) ? std::atof(v.str().c_str()) : as_double(v));
  if (name == "abs") return std::holds_alternative<double>(v.v) ? Value(std::fabs(as_double(v))) : Value(as_int(v) < 0 ? -as_int(v) : as_int(v));
  if (name == "list") return make_list(items_of(v));
  if (name == "reverse") {
    if (auto s = std::get_if<std::string>(&v.v)) return Value(std::string(s->rbegin(), s->rend()));
    List l = items_of(v);
    std::reverse(l.begin(), l.end());
    return make_list(std::move(l));
  }
  if (name == "unique") {
    List out;
    for (auto& x : items_of(v))
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); })) out.push_back(x);
    return make_list(std::move(out));
  }
  if (name == "sort") {
    List l = items_of(v);
    const Value attr = kwarg(kwargs, "attribute");
    const bool rev = kwarg(kwargs, "reverse", arg(0)).truthy(), cs = kwarg(kwargs, "case_sensitive", arg(1)).truthy();
    auto key = [&](const Value& x) { return attr.is_undefined() ? x : attribute(x, attr.str()); };
    std::stable_sort(l.begin(), l.end(), [&](const Value& a, const Value& b) { return rev ? less(key(b), key(a), cs) : less(key(a), key(b), cs); });
    return make_list(std::move(l));
  }
  if (name == "dictsort") {  // [[key, value], ...] by key (or by value with by='value')
    auto d = std::get_if<std::shared_ptr<Dict>>(&v.v);
    if (!d) fail("chat template: dictsort needs a mapping");
    List l;
    for (auto& [k, e] : **d) l.push_back(Value(std::make_shared<List>(List{Value(k), e})));
    const bool by_value = kwarg(kwargs, "by", arg(2)).str() == "value";
    const bool cs = kwarg(kwargs, "case_sensitive", arg(0)).truthy(), rev = kwarg(kwargs, "reverse", arg(3)).truthy();
    auto key = [&](const Value& pair) { return (*list_of(pair))[by_value ? 1 : 0]; };
    std::stable_sort(l.begin(), l.end(), [&](const Value& a, const Value& b) { return rev ? less(key(b), key(a), cs) : less(key(a), key(b), cs); });
    return make_list(std::move(l));
  }
  if (name == "items") {
    auto d = std::get_if<std::shared_ptr<Dict>>(&v.v);
    if (!d) fail("chat template: items needs a mapping");
    return call_method(v, "items", {});
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    // select(test, args...) / selectattr(attr[, test, args...]): without a test, truthiness.
    const bool attr = name.ends_with("attr"), keep = name.starts_with("select");
    const size_t t = attr ? 1 : 0;
    const std::string test = args.size() > t ? args[t].str() : "";
    const std::vector<Value> test_args(args.size() > t + 1 ? args.begin() + long(t) + 1 : args.end(), args.end());
    List out;
    for (auto& x : items_of(v)) {
      const Value subject = attr ? attribute(x, arg(0).str()) : x;
      const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
      if (pass == keep) out.push_back(x);
    }
    return make_list(std::move(out));
  }
  if (name == "map") {  // map(attribute='x'[, default=...]) or map('filter', args...)
    const Value attr = kwarg(kwargs, "attribute");
    List out;
    for (auto& x : items_of(v)) {
      if (!attr.is_undefined()) {
        Value a = attribute(x, attr.str());
        out.push_back(a.is_undefined() ? kwarg(kwargs, "default") : a);
      } else {
        if (args.empty()) fail("chat template: map needs a filter name or attribute=");
        out.push_back(apply_filter(args[0].str(), x, std::vector<Value>(args.begin() + 1, args.end())));
      }
    }
    return make_list(std::move(out));
  }
  if (name == "sum" || name == "min" || name == "max") {
    const List l = items_of(v);
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
    return *std::min_element(l.begin(), l.end(), [&](const Value& a, const Value& b) { return name == "min" ? less(a, b, false) : less(b, a, false); });
  }
  if (name == "indent") {  // indent(width=4, first=False, blank=False)
    const int64_t width = as_int(kwarg(kwargs, "width", args.empty() ? Value(int64_t(4)) : args[0]));
    const bool first = kwarg(kwargs, "first", arg(1)).truthy(), blank = kwarg(kwargs, "blank", arg(2)).truthy();
    if (width < 0 || width > 1024) fail("chat template: indent width {} is outside 0..1024", width);
    const std::string pad(size_t(width), ' '), s = v.str();
    std::string out;
    size_t start = 0;
    for (bool line0 = true;; line0 = false) {
      const size_t nl = s.find('\n', start);
      const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if ((!line0 || first) && (blank || !line.empty())) out += pad;
      out += line;
      if (nl == std::string::npos) break;
      out += '\n';
      start = nl + 1;
    }
    return checked(Value(out));
  }
  if (name == "replace") return call_method(v, "replace", args);
  if (name == "round") {
    const double x = as_double(v), p = std::pow(10.0, double(args.empty() ? 0 : as_int(args[0])));
    return Value(std::round(x * p) / p);
  }
  if (name == "wordcount") return Value(int64_t(length(call_method(v, "split", {}))));
  fail("chat template: unknown filter '{}'", name);
}

bool apply_test(const std::string& name, const Value& v, const std::vector<Value>& args) {
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
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equal(v, arg(0));
  if (name == "ne" || name == "!=") return !equal(v, arg(0));
  if (name == "gt" || name == ">") return less(arg(0), v, true);
  if (name == "lt" || name == "<") return less(v, arg(0), true);
  if (name == "ge" || name == ">=") return !less(v, arg(0), true);
  if (name == "le" || name == "<=") return !less(arg(0), v, true);
  if (name == "in") {
    const Value container = arg(0);
    if (auto s = std::get_if<std::string>(&container.v)) return s->find(v.str()) != std::string::npos;
    for (auto& x : items_of(container))
      if (equal(x, v)) return true;
    return false;
  }
  if (name == "divisibleby") return as_int(arg(0)) != 0 && as_int(v) % as_int(arg(0)) == 0;
  if (name == "even" || name == "odd") return (as_int(v) % 2 == 0) == (name == "even");
  if (name == "lower" || name == "upper") {
    const std::string s = v.str();
    return std::none_of(s.begin(), s.end(), [&](char c) { return name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c)); });
  }
  fail("chat template: unknown test '{}'", name);
}

}  // namespace eaglet::jinja
