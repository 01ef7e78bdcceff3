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

Budget::Budget(const RenderLimits& limits)
    : deadline_(std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limits.max_seconds))),
      cancel_(limits.cancel), max_seconds_(limits.max_seconds), report_(limits.work) {}

void Budget::check() {
  if (work_ > kMaxWork) fail("chat template: rendering did more than {} bytes of work (the limit)", kMaxWork);
  next_check_ = std::min(kMaxWork + 1, work_ + (uint64_t(1) << 20));
  if (cancel_ && cancel_->load(std::memory_order_relaxed)) fail("chat template: rendering cancelled");
  if (std::chrono::steady_clock::now() > deadline_) fail("chat template: rendering took more than {} s (the limit)", max_seconds_);
}

void Budget::step() {
  if (++steps_ > kMaxSteps) fail("chat template: rendering took more than {} steps", kMaxSteps);
  if (steps_ % 4096 == 0) check();
}

void Budget::fits(size_t n, const char* what) {
  if (n > kMaxBytes) fail("chat template: {} of {} bytes would be over the {}-byte limit", what, n, kMaxBytes);
}

uint64_t copy_cost(const Value& v) {
  auto s = std::get_if<std::string>(&v.v);
  return sizeof(Value) + (s ? s->size() : 0);
}

Value checked(Budget& b, Value v) {
  if (auto s = std::get_if<std::string>(&v.v); s && s->size() > kMaxBytes)
    fail("chat template: a string of {} bytes is over the {}-byte limit", s->size(), kMaxBytes);
  if (auto l = std::get_if<std::shared_ptr<List>>(&v.v); l && int64_t((*l)->size()) > kMaxItems)
    fail("chat template: a list of {} items is over the {}-item limit", (*l)->size(), kMaxItems);
  b.charge(copy_cost(v));
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
// ("," then a newline and the indentation), empty containers as [] and {}. Appends to `out`,
// checking its size before every piece (an indent of 10^9 must fail, not allocate 1 GB first).
class JsonWriter {
 public:
  JsonWriter(Budget& b, int64_t indent) : b_(b), indent_(indent) {}
  std::string out;

  void value(const Value& v, int depth) {
    // A namespace can be made to hold itself; never follow such a cycle (or any deep nesting) far.
    if (depth > kMaxNesting) fail("chat template: a value nests deeper than {} levels", kMaxNesting);
    if (auto l = std::get_if<std::shared_ptr<List>>(&v.v)) {
      if ((*l)->empty()) return put("[]");
      put("[");
      for (size_t i = 0; i < (*l)->size(); ++i) {
        item_break(i > 0, depth + 1);
        value((**l)[i], depth + 1);
      }
      item_end(depth);
      return put("]");
    }
    if (auto d = std::get_if<std::shared_ptr<Dict>>(&v.v)) {
      if ((*d)->empty()) return put("{}");
      put("{");
      bool first = true;
      for (auto& [k, e] : **d) {
        item_break(!first, depth + 1);
        first = false;
        put(json_string(k));
        put(": ");
        value(e, depth + 1);
      }
      item_end(depth);
      return put("}");
    }
    if (std::holds_alternative<Undefined>(v.v) || std::holds_alternative<std::nullptr_t>(v.v)) return put("null");
    if (auto x = std::get_if<bool>(&v.v)) return put(*x ? "true" : "false");
    if (auto i = std::get_if<int64_t>(&v.v)) return put(std::to_string(*i));
    if (auto f = std::get_if<double>(&v.v)) return put(nlohmann::json(*f).dump());
    put(json_string(std::get<std::string>(v.v)));
  }

 private:
  void put(const std::string& s) {
    Budget::fits(out.size() + s.size(), "tojson output");
    b_.charge(s.size());
    out += s;
  }
  void newline(int depth) {
    if (indent_ < 0) return;
    const uint64_t pad = uint64_t(indent_) * uint64_t(depth);
    Budget::fits(out.size() + 1 + size_t(std::min<uint64_t>(pad, kMaxBytes + 1)), "tojson output");
    b_.charge(pad + 1);
    out += '\n';
    out.append(size_t(pad), ' ');
  }
  void item_break(bool comma, int depth) {
    if (comma) put(indent_ < 0 ? ", " : ",");
    newline(depth);
  }
  void item_end(int depth) { newline(depth); }

  Budget& b_;
  int64_t indent_;
};
}  // namespace

std::string to_json(Budget& b, const Value& v, int64_t indent) {
  JsonWriter w(b, indent);
  w.value(v, 0);
  return std::move(w.out);
}

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
// Appends to `out` and stops at kMaxBytes (str() has no budget; its callers charge the result).
void python_repr(const Value& v, int depth, std::string& out) {
  if (depth > kMaxNesting) fail("chat template: a value nests deeper than {} levels", kMaxNesting);
  Budget::fits(out.size(), "a printed value");
  if (auto s = std::get_if<std::string>(&v.v)) {
    Budget::fits(out.size() + s->size(), "a printed value");
    const char q = s->find('\'') != std::string::npos && s->find('"') == std::string::npos ? '"' : '\'';
    out += q;
    for (char c : *s) {
      if (c == q || c == '\\') out += '\\', out += c;
      else if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else out += c;
    }
    out += q;
  } else if (auto l = std::get_if<std::shared_ptr<List>>(&v.v)) {
    out += '[';
    for (size_t i = 0; i < (*l)->size(); ++i) {
      if (i) out += ", ";
      python_repr((**l)[i], depth + 1, out);
    }
    out += ']';
  } else if (auto d = std::get_if<std::shared_ptr<Dict>>(&v.v)) {
    out += '{';
    bool first = true;
    for (auto& [k, e] : **d) {
      if (!first) out += ", ";
      first = false;
      python_repr(Value(k), depth + 1, out);
      out += ": ";
      python_repr(e, depth + 1, out);
    }
    out += '}';
  } else {
    out += v.str();
  }
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
        else {
          std::string out;
          python_repr(*this, 0, out);
          return out;
        }
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

bool equal(Budget& bu, const Value& a, const Value& b) {
  bu.charge(kCompareCost);
  if (is_num(a) && is_num(b)) return as_double(a) == as_double(b);
  if (a.v.index() != b.v.index()) return (a.is_undefined() || std::holds_alternative<std::nullptr_t>(a.v)) &&
                                         (b.is_undefined() || std::holds_alternative<std::nullptr_t>(b.v));
  if (auto s = std::get_if<std::string>(&a.v)) {
    const std::string& t = std::get<std::string>(b.v);
    bu.charge(std::min(s->size(), t.size()));
    return *s == t;
  }
  if (auto x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
  if (std::holds_alternative<Undefined>(a.v) || std::holds_alternative<std::nullptr_t>(a.v)) return true;
  return to_json(bu, a) == to_json(bu, b);
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

Value subscript(Budget& b, const Value& base, const Value& key) {
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&base.v)) {
    const std::string k = key.str();
    b.charge(k.size());
    auto it = (*d)->find(k);
    return it == (*d)->end() ? Value() : checked(b, it->second);
  }
  if (auto l = std::get_if<std::shared_ptr<List>>(&base.v)) {
    int64_t i = as_int(key);
    if (i < 0) i += int64_t((*l)->size());
    return i >= 0 && i < int64_t((*l)->size()) ? checked(b, (**l)[size_t(i)]) : Value();
  }
  if (auto s = std::get_if<std::string>(&base.v)) {
    int64_t i = as_int(key);
    if (i < 0) i += int64_t(s->size());
    return i >= 0 && i < int64_t(s->size()) ? Value(std::string(1, (*s)[size_t(i)])) : Value();
  }
  return Value();
}


// ---- built-ins ----------------------------------------------------------------------------

namespace {
// Python's str.replace: one pass over the input, the output checked against kMaxBytes as it grows
// (replacing in place re-scanned and moved the tail for every match: 13 s for 1 MB).
std::string replace_all(Budget& b, const std::string& s, const std::string& from, const std::string& to) {
  b.charge(s.size());
  if (from.empty()) return s;  // Python inserts `to` between characters; no template relies on it
  std::string out;
  size_t start = 0;
  for (size_t p; (p = s.find(from, start)) != std::string::npos; start = p + from.size()) {
    Budget::fits(out.size() + (p - start) + to.size(), "a replaced string");
    b.charge(p - start + to.size());
    out.append(s, start, p - start);
    out += to;
  }
  b.charge(s.size() - start);
  out.append(s, start, std::string::npos);
  return out;
}

Value split(Budget& b, const std::string& str, const std::string& sep) {
  b.charge(str.size());
  auto l = std::make_shared<List>();
  auto add = [&](std::string piece) {
    b.charge(sizeof(Value) + piece.size());
    l->push_back(Value(std::move(piece)));
  };
  if (sep.empty()) {
    size_t p = 0;
    while (true) {
      p = str.find_first_not_of(" \t\n\r", p);
      if (p == std::string::npos) break;
      size_t e = str.find_first_of(" \t\n\r", p);
      add(str.substr(p, e - p));
      if (e == std::string::npos) break;
      p = e;
    }
  } else {
    size_t p = 0, e;
    while ((e = str.find(sep, p)) != std::string::npos) {
      add(str.substr(p, e - p));
      p = e + sep.size();
    }
    add(str.substr(p));
  }
  return Value(l);
}
}  // namespace

Value call_method(Budget& b, const Value& self, const std::string& n, const std::vector<Value>& a) {
  auto arg = [&](size_t i) { return i < a.size() ? a[i] : Value(); };
  if (auto str = std::get_if<std::string>(&self.v)) {
    if (n == "startswith") return Value(str->rfind(arg(0).str(), 0) == 0);
    if (n == "endswith") {
      const std::string suf = arg(0).str();
      return Value(str->size() >= suf.size() && str->compare(str->size() - suf.size(), suf.size(), suf) == 0);
    }
    b.charge(str->size());  // every other method reads the whole string
    if (n == "strip") return Value(strip_chars(*str, arg(0).is_undefined() ? "" : arg(0).str(), true, true));
    if (n == "lstrip") return Value(strip_chars(*str, arg(0).is_undefined() ? "" : arg(0).str(), true, false));
    if (n == "rstrip") return Value(strip_chars(*str, arg(0).is_undefined() ? "" : arg(0).str(), false, true));
    if (n == "upper" || n == "lower") {
      std::string o = *str;
      for (auto& ch : o) ch = char(n == "upper" ? std::toupper(static_cast<unsigned char>(ch)) : std::tolower(static_cast<unsigned char>(ch)));
      return Value(o);
    }
    if (n == "replace") return Value(replace_all(b, *str, arg(0).str(), arg(1).str()));
    if (n == "split") return split(b, *str, arg(0).is_undefined() ? "" : arg(0).str());
  }
  if (auto d = std::get_if<std::shared_ptr<Dict>>(&self.v)) {
    b.charge(kCompareCost * ((*d)->size() + 1));  // a lookup scans the (insertion-ordered) keys
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
        b.charge(copy_cost(l->back()) + (n == "items" ? copy_cost(v) : 0));
      }
      return Value(l);
    }
  }
  fail("chat template: unknown method '{}'", n);
}

bool is_builtin_function(const std::string& name) {
  return name == "namespace" || name == "range" || name == "raise_exception" || name == "strftime_now";
}

Value call_function(Budget& b, const std::string& fn, const std::vector<Value>& a, const Kwargs& kwargs) {
  auto arg = [&](size_t i) { return i < a.size() ? a[i] : Value(); };
  if (fn == "namespace") {
    auto d = std::make_shared<Dict>();
    for (auto& [k, e] : kwargs) (*d)[k] = e;
    return Value(d);
  }
  if (fn == "range") {
    auto l = std::make_shared<List>();
    const int64_t lo = a.size() > 1 ? as_int(a[0]) : 0, hi = as_int(a.size() > 1 ? a[1] : arg(0));
    const int64_t step = a.size() > 2 ? as_int(a[2]) : 1;
    if (step == 0) fail("chat template: range() step must not be zero");
    // The count in unsigned arithmetic: hi - lo overflows int64 for range(INT64_MIN, INT64_MAX).
    const uint64_t span = step > 0 ? (hi > lo ? uint64_t(hi) - uint64_t(lo) : 0) : (lo > hi ? uint64_t(lo) - uint64_t(hi) : 0);
    const uint64_t mag = step > 0 ? uint64_t(step) : uint64_t(0) - uint64_t(step);
    const uint64_t count = span == 0 ? 0 : (span - 1) / mag + 1;
    if (count > uint64_t(kMaxItems)) fail("chat template: range({}, {}) is over the {}-item limit", lo, hi, kMaxItems);
    b.charge(count * sizeof(Value));
    for (uint64_t i = 0; i < count; ++i) l->push_back(Value(int64_t(uint64_t(lo) + i * uint64_t(step))));
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
