#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "core/error.h"

namespace eaglet::jinja {

// ---- values -------------------------------------------------------------------------------

namespace {
template <typename Json>
Value value_of(const Json& j) {
  if (j.is_null()) return Value(nullptr);
  if (j.is_boolean()) return Value(j.template get<bool>());
  if (j.is_number_integer()) return Value(j.template get<int64_t>());
  if (j.is_number()) return Value(j.template get<double>());
  if (j.is_string()) return Value(j.template get<std::string>());
  if (j.is_array()) {
    auto l = std::make_shared<List>();
    for (auto& e : j) l->push_back(value_of(e));
    return Value(l);
  }
  auto d = std::make_shared<Dict>();
  for (auto& [k, e] : j.items()) (*d)[k] = value_of(e);
  return Value(d);
}
}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_of(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_of(j); }

bool Value::truthy() const {
  return std::visit(
      [](auto&& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Undefined> || std::is_same_v<T, std::nullptr_t>) return false;
        else if constexpr (std::is_same_v<T, bool>) return x;
        else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) return x != 0;
        else if constexpr (std::is_same_v<T, std::string>) return !x.empty();
        else return !x->empty();
      },
      v);
}

namespace {
std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Value checked(Value v) {
  if (auto s = std::get_if<std::string>(&v.v); s && s->size() > kMaxBytes)
    fail("chat template: a string of {} bytes is over the {}-byte limit", s->size(), kMaxBytes);
  if (auto l = std::get_if<std::shared_ptr<List>>(&v.v); l && int64_t((*l)->size()) > kMaxItems)
    fail("chat template: a list of {} items is over the {}-item limit", (*l)->size(), kMaxItems);
  return v;
}

int64_t checked_arith(char op, int64_t x, int64_t y) {
  int64_t r = 0;
  const bool over = op == '+' ? __builtin_add_overflow(x, y, &r) : op == '-' ? __builtin_sub_overflow(x, y, &r)
                                                                            : __builtin_mul_overflow(x, y, &r);
  if (over) fail("chat template: integer overflow in {} {} {}", x, op, y);
  return r;
}

namespace {
// Python's json.dumps layout: ", " and ": " on one line, or with `indent` >= 0 one item per line
// ("," then a newline and the indentation), empty containers as [] and {}.
std::string to_json(const Value& v, int depth, int indent) {
  // A namespace can be made to hold itself; never follow such a cycle (or any deep nesting) far.
  if (depth > kMaxNesting) fail("chat template: a value nests deeper than {} levels", kMaxNesting);
  const std::string sep = indent < 0 ? ", " : ",\n" + std::string(size_t(indent) * size_t(depth + 1), ' ');
  const std::string open_pad = indent < 0 ? "" : "\n" + std::string(size_t(indent) * size_t(depth + 1), ' ');
  const std::string close_pad = indent < 0 ? "" : "\n" + std::string(size_t(indent) * size_t(depth), ' ');
  return std::visit(
      [&](auto&& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Undefined> || std::is_same_v<T, std::nullptr_t>) return "null";
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>) return nlohmann::json(x).dump();
        else if constexpr (std::is_same_v<T, std::string>) return json_string(x);
        else if constexpr (std::is_same_v<T, std::shared_ptr<List>>) {
          if (x->empty()) return "[]";
          std::string s = "[" + open_pad;
          for (size_t i = 0; i < x->size(); ++i) s += (i ? sep : "") + to_json((*x)[i], depth + 1, indent);
          return s + close_pad + "]";
        } else {
          if (x->empty()) return "{}";
          std::string s = "{" + open_pad;
          bool first = true;
          for (auto& [k, e] : *x) {
            s += (first ? "" : sep) + json_string(k) + ": " + to_json(e, depth + 1, indent);
            first = false;
          }
          return s + close_pad + "}";
        }
      },
      v.v);
}
}  // namespace

std::string to_json(const Value& v, int indent) { return to_json(v, 0, indent); }

bool reaches(const Value& v, const Dict* d, int depth) {
  if (depth > kMaxNesting) fail("chat template: a value nests deeper than {} levels", kMaxNesting);
  if (auto x = std::get_if<std::shared_ptr<Dict>>(&v.v)) {
    if (x->get() == d) return true;
    for (auto& [k, e] : **x)
      if (reaches(e, d, depth + 1)) return true;
  } else if (auto l = std::get_if<std::shared_ptr<List>>(&v.v)) {
    for (auto& e : **l)
      if (reaches(e, d, depth + 1)) return true;
  }
  return false;
}

namespace {
// How Python prints a container: repr() of its items ('single-quoted' strings, None, True).
std::string python_repr(const Value& v, int depth) {
  if (depth > kMaxNesting) fail("chat template: a value nests deeper than {} levels", kMaxNesting);
  if (auto s = std::get_if<std::string>(&v.v)) {
    const char q = s->find('\'') != std::string::npos && s->find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (char c : *s) {
      if (c == q || c == '\\') out += '\\', out += c;
      else if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else out += c;
    }
    return out + q;
  }
  if (auto l = std::get_if<std::shared_ptr<List>>(&v.v)) {
    std::string out = "[";
    for (size_t i = 0; i < (*l)->size(); ++i) out += (i ? ", " : "") + python_repr((**l)[i], depth + 1);
    return out + "]";
  }
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&v.v)) {
    std::string out = "{";
    bool first = true;
    for (auto& [k, e] : **d) {
      out += (first ? "" : ", ") + python_repr(Value(k), depth + 1) + ": " + python_repr(e, depth + 1);
      first = false;
    }
    return out + "}";
  }
  return v.str();
}
}  // namespace

std::string Value::str() const {
  return std::visit(
      [&](auto&& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Undefined>) return "";
        else if constexpr (std::is_same_v<T, std::nullptr_t>) return "None";
        else if constexpr (std::is_same_v<T, bool>) return x ? "True" : "False";
        else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>) {
          std::string s = nlohmann::json(x).dump();
          return s.find('.') == std::string::npos && s.find('e') == std::string::npos ? s + ".0" : s;
        } else if constexpr (std::is_same_v<T, std::string>) return x;
        else return python_repr(*this, 0);
      },
      v);
}


// ---- helpers ------------------------------------------------------------------------------

int64_t as_int(const Value& v) {
  if (auto i = std::get_if<int64_t>(&v.v)) return *i;
  if (auto d = std::get_if<double>(&v.v)) {
    if (!(*d >= -9.2e18 && *d <= 9.2e18)) fail("chat template: {} does not fit an integer", *d);
    return int64_t(*d);
  }
  if (auto b = std::get_if<bool>(&v.v)) return *b;
  fail("chat template: expected a number, got '{}'", v.str());
}
bool is_num(const Value& v) { return std::holds_alternative<int64_t>(v.v) || std::holds_alternative<double>(v.v); }
double as_double(const Value& v) { return std::holds_alternative<double>(v.v) ? std::get<double>(v.v) : double(as_int(v)); }

bool equal(const Value& a, const Value& b) {
  if (is_num(a) && is_num(b)) return as_double(a) == as_double(b);
  if (a.v.index() != b.v.index()) return (a.is_undefined() || std::holds_alternative<std::nullptr_t>(a.v)) &&
                                         (b.is_undefined() || std::holds_alternative<std::nullptr_t>(b.v));
  if (auto s = std::get_if<std::string>(&a.v)) return *s == std::get<std::string>(b.v);
  if (auto x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
  return to_json(a) == to_json(b);
}

size_t length(const Value& v) {
  if (auto s = std::get_if<std::string>(&v.v)) return s->size();
  if (auto l = std::get_if<std::shared_ptr<List>>(&v.v)) return (*l)->size();
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&v.v)) return (*d)->size();
  fail("chat template: value has no length");
}

std::string strip_chars(std::string s, const std::string& chars, bool left, bool right) {
  const std::string cs = chars.empty() ? " \t\n\r\f\v" : chars;
  if (left) s.erase(0, std::min(s.size(), s.find_first_not_of(cs)));
  if (right) {
    const size_t e = s.find_last_not_of(cs);
    s.erase(e == std::string::npos ? 0 : e + 1);
  }
  return s;
}

Value subscript(const Value& base, const Value& key) {
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&base.v)) {
    auto it = (*d)->find(key.str());
    return it == (*d)->end() ? Value() : it->second;
  }
  if (auto l = std::get_if<std::shared_ptr<List>>(&base.v)) {
    int64_t i = as_int(key);
    if (i < 0) i += int64_t((*l)->size());
    return i >= 0 && i < int64_t((*l)->size()) ? (**l)[size_t(i)] : Value();
  }
  if (auto s = std::get_if<std::string>(&base.v)) {
    int64_t i = as_int(key);
    if (i < 0) i += int64_t(s->size());
    return i >= 0 && i < int64_t(s->size()) ? Value(std::string(1, (*s)[size_t(i)])) : Value();
  }
  return Value();
}


// ---- built-ins ----------------------------------------------------------------------------

Value call_method(const Value& self, const std::string& n, const std::vector<Value>& a) {
  auto arg = [&](size_t i) { return i < a.size() ? a[i] : Value(); };
  if (auto str = std::get_if<std::string>(&self.v)) {
    if (n == "startswith") return Value(str->rfind(arg(0).str(), 0) == 0);
    if (n == "endswith") {
      const std::string suf = arg(0).str();
      return Value(str->size() >= suf.size() && str->compare(str->size() - suf.size(), suf.size(), suf) == 0);
    }
    if (n == "strip") return Value(strip_chars(*str, arg(0).is_undefined() ? "" : arg(0).str(), true, true));
    if (n == "lstrip") return Value(strip_chars(*str, arg(0).is_undefined() ? "" : arg(0).str(), true, false));
    if (n == "rstrip") return Value(strip_chars(*str, arg(0).is_undefined() ? "" : arg(0).str(), false, true));
    if (n == "upper" || n == "lower") {
      std::string o = *str;
      for (auto& ch : o) ch = char(n == "upper" ? std::toupper(static_cast<unsigned char>(ch)) : std::tolower(static_cast<unsigned char>(ch)));
      return Value(o);
    }
    if (n == "replace") {
      std::string o = *str, from = arg(0).str(), to = arg(1).str();
      for (size_t p = 0; !from.empty() && (p = o.find(from, p)) != std::string::npos; p += to.size()) o.replace(p, from.size(), to);
      return Value(o);
    }
    if (n == "split") {
      auto l = std::make_shared<List>();
      const std::string sep = arg(0).is_undefined() ? "" : arg(0).str();
      if (sep.empty()) {
        size_t p = 0;
        while (true) {
          p = str->find_first_not_of(" \t\n\r", p);
          if (p == std::string::npos) break;
          size_t e = str->find_first_of(" \t\n\r", p);
          l->push_back(Value(str->substr(p, e - p)));
          if (e == std::string::npos) break;
          p = e;
        }
      } else {
        size_t p = 0, e;
        while ((e = str->find(sep, p)) != std::string::npos) {
          l->push_back(Value(str->substr(p, e - p)));
          p = e + sep.size();
        }
        l->push_back(Value(str->substr(p)));
      }
      return Value(l);
    }
  }
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&self.v)) {
    if (n == "get") {
      auto it = (*d)->find(arg(0).str());
      return it == (*d)->end() ? (a.size() > 1 ? a[1] : Value(nullptr)) : it->second;
    }
    if (n == "items" || n == "keys" || n == "values") {
      auto l = std::make_shared<List>();
      for (auto& [k, v] : **d) {
        if (n == "keys") l->push_back(Value(k));
        else if (n == "values") l->push_back(v);
        else l->push_back(Value(std::make_shared<List>(List{Value(k), v})));
      }
      return Value(l);
    }
  }
  fail("chat template: unknown method '{}'", n);
}

bool is_builtin_function(const std::string& name) {
  return name == "namespace" || name == "range" || name == "raise_exception" || name == "strftime_now";
}

Value call_function(const std::string& fn, const std::vector<Value>& a,
                    const std::vector<std::pair<std::string, Value>>& kwargs) {
  auto arg = [&](size_t i) { return i < a.size() ? a[i] : Value(); };
  if (fn == "namespace") {
    auto d = std::make_shared<Dict>();
    for (auto& [k, e] : kwargs) (*d)[k] = e;
    return Value(d);
  }
  if (fn == "range") {
    auto l = std::make_shared<List>();
    const int64_t lo = a.size() > 1 ? as_int(a[0]) : 0, hi = as_int(a.size() > 1 ? a[1] : arg(0));
    if (hi > lo && (hi - lo > kMaxItems || hi - lo < 0))  // (hi - lo) may wrap
      fail("chat template: range({}, {}) is over the {}-item limit", lo, hi, kMaxItems);
    for (int64_t i = lo; i < hi; ++i) l->push_back(Value(i));
    return Value(l);
  }
  if (fn == "raise_exception") fail("chat template: {}", arg(0).str());
  if (fn == "strftime_now") {  // Hugging Face's helper (Llama 3.x, Mistral, gpt-oss date lines)
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, arg(0).str().c_str(), &tm);
    return Value(std::string(buf, n));
  }
  fail("chat template: unknown function '{}'", fn);
}

}  // namespace eaglet::jinja
