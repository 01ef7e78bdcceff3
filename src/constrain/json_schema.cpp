#include "constrain/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "constrain/regex.h"
#include "core/error.h"

namespace eaglet::constrain {
namespace {

using Json = nlohmann::ordered_json;
using gbnf::CodeRanges;

constexpr int64_t kMaxCount = 100000;  // minLength, maxItems...: each count becomes grammar rules

// Keywords that change nothing about which texts are valid.
const std::set<std::string> kAnnotations = {"title",    "description", "$schema",    "$id",      "$comment",
                                            "examples", "default",     "deprecated", "readOnly", "writeOnly"};
enum class Family { Object, Array, String, Numeric };
// The keywords that only constrain values of one kind (JSON Schema: others pass them).
const std::map<std::string, Family> kTypedKeywords = {{"properties", Family::Object},
                                                      {"required", Family::Object},
                                                      {"additionalProperties", Family::Object},
                                                      {"items", Family::Array},
                                                      {"prefixItems", Family::Array},
                                                      {"additionalItems", Family::Array},
                                                      {"minItems", Family::Array},
                                                      {"maxItems", Family::Array},
                                                      {"uniqueItems", Family::Array},
                                                      {"minLength", Family::String},
                                                      {"maxLength", Family::String},
                                                      {"pattern", Family::String},
                                                      {"format", Family::String},
                                                      {"minimum", Family::Numeric},
                                                      {"maximum", Family::Numeric},
                                                      {"exclusiveMinimum", Family::Numeric},
                                                      {"exclusiveMaximum", Family::Numeric}};
const char* const kTypeOrder[] = {"object", "array", "string", "integer", "number", "boolean", "null"};

// The fixed rules, with the rules each one uses.
struct Prim {
  const char* body;
  std::vector<const char*> uses;
};
const std::map<std::string, Prim> kPrims = {
    {"ws", {"( \" \" | \"\\n\" [ \\t]{0,20} )?", {}}},
    {"value",
     {"object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}}},
    {"object",
     {"\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"",
      {"ws", "string", "value"}}},
    {"array", {"\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"", {"ws", "value"}}},
    {"string", {"\"\\\"\" char* \"\\\"\"", {"char"}}},
    // Any character of a JSON string: raw (no quote, backslash or control character) or escaped;
    // \u escapes of surrogates only as a high-low pair (one character, as minLength counts).
    {"char",
     {"[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] hex hex hex | [dD] [0-7] hex hex"
      " | [dD] [89abAB] hex hex \"\\\\u\" [dD] [c-fC-F] hex hex ) )",
      {"hex"}}},
    {"hex", {"[0-9a-fA-F]", {}}},
    {"number", {"integer ( \".\" [0-9]+ )? ( [eE] ( \"+\" | \"-\" )? [0-9]+ )?", {"integer"}}},
    {"integer", {"\"-\"? ( \"0\" | [1-9] [0-9]* )", {}}},
    {"boolean", {"\"true\" | \"false\"", {}}},
    {"null", {"\"null\"", {}}},
    // RFC 3339 dates and times, as JSON Schema's formats: each month's own length, February's 29
    // in any year (leap years are not told apart).
    {"fmt-date", {"[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
                  "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
                  "\"02-\" ( \"0\" [1-9] | [12] [0-9] ) )", {}}},
    {"fmt-time",
     {"( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]+ )?"
      " ( [zZ] | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
      {}}},
    {"fmt-uuid", {"hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}", {"hex"}}},
};

std::string brief(const Json& v) {
  const std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

// The JSON path of a member: $.properties.age, or $.properties["first name"].
std::string child(const std::string& path, const std::string& key) {
  const bool plain = !key.empty() && !std::isdigit(uint8_t(key[0])) && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(uint8_t(c)) || c == '_' || c == '$';
  });
  return plain ? path + "." + key : path + "[" + brief(Json(key)) + "]";
}
std::string index(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + " " + b; }

std::string quantify(const std::string& term, int64_t lo, int64_t hi) {  // hi -1: unbounded
  if (hi == 0) return "";
  if (lo == 1 && hi == 1) return term;
  if (lo == 0 && hi == -1) return term + "*";
  if (lo == 1 && hi == -1) return term + "+";
  if (lo == 0 && hi == 1) return term + "?";
  if (lo == hi) return fmt::format("{}{{{}}}", term, lo);
  if (hi == -1) return fmt::format("{}{{{},}}", term, lo);
  return fmt::format("{}{{{},{}}}", term, lo, hi);
}

// ---- integer ranges, digit by digit ----

uint64_t pow10(size_t d) {
  uint64_t p = 1;
  while (d--) p *= 10;
  return p;
}

std::string digit_class(char a, char b) {
  return a == b ? fmt::format("\"{}\"", a) : b == a + 1 ? fmt::format("[{}{}]", a, b) : fmt::format("[{}-{}]", a, b);
}

std::string any_digits(size_t n) { return n == 0 ? "" : n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n); }

// Alternatives `pre` `digits` + each digit string in [x, y] (equal lengths, leading zeros
// allowed): the common prefix, then the low end's tail, the digits in between, the high end's tail.
void fixed_width(const std::string& x, const std::string& y, const std::string& pre, std::string digits,
                 std::vector<std::string>* out) {
  size_t k = 0;
  while (k < x.size() && x[k] == y[k]) ++k;
  digits += x.substr(0, k);
  const std::string p = join(pre, digits.empty() ? "" : "\"" + digits + "\"");
  if (k == x.size()) {
    out->push_back(p);
    return;
  }
  const std::string xr = x.substr(k + 1), yr = y.substr(k + 1);
  const bool x_low = xr.find_first_not_of('0') == std::string::npos;
  const bool y_high = yr.find_first_not_of('9') == std::string::npos;
  const char mid_lo = x_low ? x[k] : char(x[k] + 1), mid_hi = y_high ? y[k] : char(y[k] - 1);
  if (!x_low) fixed_width(xr, std::string(xr.size(), '9'), pre, digits + x[k], out);
  if (mid_lo <= mid_hi) out->push_back(join(join(p, digit_class(mid_lo, mid_hi)), any_digits(xr.size())));
  if (!y_high) fixed_width(std::string(yr.size(), '0'), yr, pre, digits + y[k], out);
}

// Decimal numbers (no leading zeros) in [a, b], b absent: unbounded.
void nonneg_range(uint64_t a, std::optional<uint64_t> b, const std::string& pre, std::vector<std::string>* out) {
  const size_t da = std::to_string(a).size(), db = b ? std::to_string(*b).size() : da;
  for (size_t d = da; d <= db; ++d) {
    const uint64_t lo = d == da ? a : pow10(d - 1);
    const uint64_t hi = b && d == db ? *b : pow10(d) - 1;
    fixed_width(std::to_string(lo), std::to_string(hi), pre, "", out);
  }
  if (!b) out->push_back(join(pre, fmt::format("[1-9] [0-9]{{{},}}", da)));  // every longer number
}

std::string int_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // magnitudes of the negative part; 0 - uint64(x) is |x| even for INT64_MIN
    const uint64_t mag_lo = hi && *hi < 0 ? 0 - uint64_t(*hi) : 1;
    const std::optional<uint64_t> mag_hi = lo ? std::optional<uint64_t>(0 - uint64_t(*lo)) : std::nullopt;
    nonneg_range(mag_lo, mag_hi, "\"-\"", &alts);
  }
  if (!hi || *hi >= 0)
    nonneg_range(lo ? uint64_t(std::max<int64_t>(*lo, 0)) : 0, hi ? std::optional<uint64_t>(*hi) : std::nullopt, "",
                 &alts);
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

bool type_matches(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  return v.is_object();
}

// Holds the rules written so far and turns schemas into GBNF expressions.
class Converter {
 public:
  Converter(const Json& root, bool strict) : root_(root), strict_(strict) {
    names_.insert("root");
    for (const auto& [name, p] : kPrims) names_.insert(name);
  }

  std::string run() {
    define("#", root_, "$", "$", "root");
    return text();
  }

  std::string run_prim(const std::string& name) {
    add("root", prim(name));
    return text();
  }

 private:
  // ---- rules ----

  std::string text() const {
    std::string out;
    for (const auto& [name, body] : rules_)
      if (name == "root") out += name + " ::= " + body + "\n";
    for (const auto& [name, body] : rules_)
      if (name != "root") out += name + " ::= " + body + "\n";
    return out;
  }

  void add(const std::string& name, const std::string& body) { rules_.push_back({name, body.empty() ? "\"\"" : body}); }

  // A fresh rule name from a hint such as a JSON path.
  std::string unique(const std::string& hint) {
    std::string base;
    for (char c : hint) {
      const bool ok = std::isalnum(uint8_t(c));
      if (ok)
        base += c;
      else if (!base.empty() && base.back() != '-')
        base += '-';
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.size() > 40) base = base.substr(base.size() - 40);
    if (base.empty() || base.front() == '-') base = "s" + base;
    std::string name = base;
    for (int i = 2; names_.count(name); ++i) name = fmt::format("{}-{}", base, i);
    names_.insert(name);
    return name;
  }

  // A new rule for `body` (named after `path`); returns its name.
  std::string rule(const std::string& path, const std::string& body) {
    const std::string name = unique(path == "$" ? "schema" : path.substr(2));
    add(name, body);
    return name;
  }

  std::string prim(const std::string& name) {
    if (!prims_done_.insert(name).second) return name;
    const Prim& p = kPrims.at(name);
    for (const char* u : p.uses) prim(u);
    add(name, p.body);
    return name;
  }

  // ---- references ----

  // The rule of a definition (or of the root, key "#"), written once. `leading_` holds the
  // definitions entered since the text last had to advance: meeting one of them again would be
  // left recursion, which a top-down matcher cannot follow.
  std::string define(const std::string& key, const Json& schema, const std::string& path, const std::string& ref_path,
                     const std::string& hint) {
    if (auto it = defs_.find(key); it != defs_.end()) {
      if (leading_.count(key)) fail("{}: '{}' refers back to itself before any text (left recursion)", ref_path, key);
      return it->second;
    }
    const std::string name = key == "#" ? "root" : unique(hint);
    defs_[key] = name;
    leading_.insert(key);
    const std::string body = gen(schema, path);
    leading_.erase(key);
    add(name, body);
    return name;
  }

  std::string ref(const Json& r, const std::string& path) {
    if (!r.is_string()) fail("{}: must be a string (got {})", path, brief(r));
    const std::string s = r.get<std::string>();
    if (s == "#") return define("#", root_, "$", path, "root");
    for (const char* section : {"$defs", "definitions"}) {
      const std::string prefix = fmt::format("#/{}/", section);
      if (s.rfind(prefix, 0) != 0) continue;
      std::string name;
      const std::string rest = s.substr(prefix.size());
      for (size_t i = 0; i < rest.size(); ++i) {  // JSON pointer escapes: ~1 is '/', ~0 is '~'
        if (rest[i] == '/') fail("{}: only references to whole definitions are supported (got '{}')", path, s);
        if (rest[i] == '~' && i + 1 < rest.size() && (rest[i + 1] == '0' || rest[i + 1] == '1')) {
          name += rest[++i] == '0' ? '~' : '/';
        } else {
          name += rest[i];
        }
      }
      if (!root_.is_object() || !root_.contains(section) || !root_.at(section).is_object() ||
          !root_.at(section).contains(name))
        fail("{}: '{}' is not defined", path, s);
      return define(s, root_.at(section).at(name), child(child("$", section), name), path, "def-" + name);
    }
    fail("{}: only references to \"#\", \"#/$defs/NAME\" and \"#/definitions/NAME\" are supported (got '{}')", path, s);
  }

  // Children of objects and arrays come after some text ("{", "["): no left recursion through them.
  class AfterText {
   public:
    explicit AfterText(std::set<std::string>* leading) : leading_(leading), saved_(std::exchange(*leading, {})) {}
    ~AfterText() { *leading_ = std::move(saved_); }

   private:
    std::set<std::string>* leading_;
    std::set<std::string> saved_;
  };

  // ---- schemas ----

  std::string gen(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("{}: the schema false accepts no value", path);
      return prim("value");
    }
    if (!s.is_object()) fail("{}: a schema must be an object or a boolean (got {})", path, brief(s));
    std::vector<std::string> keys;  // the keywords that constrain
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.count(k)) continue;
      if (k == "$defs" || k == "definitions") {
        if (!v.is_object()) fail("{}: must be an object", child(path, k));
        continue;
      }
      if (k != "type" && k != "$ref" && k != "anyOf" && k != "oneOf" && k != "allOf" && k != "enum" && k != "const" &&
          !kTypedKeywords.count(k))
        fail("{}: keyword '{}' is not supported", child(path, k), k);
      keys.push_back(k);
    }
    for (const char* k : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (!s.contains(k)) continue;
      for (const auto& other : keys)
        if (other != k)
          fail("{}: '{}' beside '{}' is not supported (only annotations may go with it)", child(path, other), other, k);
    }
    if (s.contains("$ref")) return ref(s.at("$ref"), child(path, "$ref"));
    if (s.contains("anyOf")) return any_of(s.at("anyOf"), child(path, "anyOf"));
    // oneOf as anyOf (vLLM and xgrammar do the same): exclusivity cannot be checked while
    // generating, and the branches of real schemas rarely overlap.
    if (s.contains("oneOf")) return any_of(s.at("oneOf"), child(path, "oneOf"));
    if (s.contains("allOf")) {
      const Json& all = s.at("allOf");
      if (!all.is_array() || all.size() != 1)
        fail("{}: only a list of exactly one schema is supported", child(path, "allOf"));
      return gen(all[0], index(child(path, "allOf"), 0));
    }
    if (s.contains("enum") || s.contains("const")) return values(s, path, keys);
    return typed(s, path);
  }

  std::string any_of(const Json& list, const std::string& path) {
    if (!list.is_array() || list.empty()) fail("{}: must be a non-empty list of schemas", path);
    std::string body;
    for (size_t i = 0; i < list.size(); ++i) body += (i ? " | " : "") + gen(list[i], index(path, i));
    return list.size() == 1 ? body : rule(path, body);
  }

  // The types a schema allows; empty: any value.
  std::vector<std::string> types_of(const Json& s, const std::string& path) {
    std::set<std::string> types;
    if (s.contains("type")) {
      const Json& t = s.at("type");
      const std::string where = child(path, "type");
      if (!t.is_string() && !(t.is_array() && !t.empty()))
        fail("{}: must be a type name or a list of them (got {})", where, brief(t));
      for (const Json& name : t.is_array() ? t : Json::array({t})) {
        const auto known =
            std::find(std::begin(kTypeOrder), std::end(kTypeOrder), name.is_string() ? name.get<std::string>() : "");
        if (known == std::end(kTypeOrder)) fail("{}: unknown type {}", where, brief(name));
        types.insert(*known);
      }
    } else {  // the type the keywords speak of (a typeless schema would also take every other type)
      for (const auto& [k, family] : kTypedKeywords) {
        if (!s.contains(k)) continue;
        types.insert(family == Family::Object   ? "object"
                     : family == Family::Array  ? "array"
                     : family == Family::String ? "string"
                                                : "number");
      }
    }
    if (types.count("number")) types.erase("integer");
    std::vector<std::string> out;
    for (const char* t : kTypeOrder)
      if (types.count(t)) out.push_back(t);
    return out;
  }

  std::string values(const Json& s, const std::string& path, const std::vector<std::string>& keys) {
    for (const auto& k : keys)
      if (k != "enum" && k != "const" && k != "type")
        fail("{}: '{}' beside enum or const is not supported", child(path, k), k);
    if (s.contains("enum") && s.contains("const")) fail("{}: both enum and const", path);
    const std::string where = child(path, s.contains("enum") ? "enum" : "const");
    const Json list = s.contains("enum") ? s.at("enum") : Json::array({s.at("const")});
    if (!list.is_array() || list.empty()) fail("{}: must be a non-empty list", where);
    const std::vector<std::string> types = types_of(s, path);
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      const bool typed_ok =
          types.empty() || std::any_of(types.begin(), types.end(), [&](auto& t) { return type_matches(list[i], t); });
      if (!typed_ok) continue;
      std::string v = value_literal(list[i], index(where, i));
      if (std::find(alts.begin(), alts.end(), v) == alts.end()) alts.push_back(std::move(v));
    }
    if (alts.empty()) fail("{}: no value has the schema's type", where);
    std::string body;
    for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
    return alts.size() == 1 && !s.contains("enum") ? body : rule(path, body);
  }

  // One JSON value as its serialization, with optional whitespace between tokens.
  std::string value_literal(const Json& v, const std::string& where) {
    if (!v.is_object() && !v.is_array()) return gbnf::literal(v.dump(), where);
    const std::string ws = prim("ws");
    std::string out = v.is_object() ? "\"{\" " + ws : "\"[\" " + ws;
    size_t i = 0;
    for (const auto& [k, x] : v.items()) {
      if (i++) out += " \",\" " + ws;
      if (v.is_object()) out += " " + gbnf::literal(Json(k).dump(), where) + " " + ws + " \":\" " + ws;
      out += " " + value_literal(x, where) + " " + ws;
    }
    return out + (v.is_object() ? " \"}\"" : " \"]\"");
  }

  std::string typed(const Json& s, const std::string& path) {
    const std::vector<std::string> types = types_of(s, path);
    if (types.empty()) return prim("value");
    for (const auto& entry : kTypedKeywords) {
      const std::string& k = entry.first;
      const Family family = entry.second;  // (a plain variable: clang 14 lambdas cannot capture bindings)
      if (!s.contains(k)) continue;
      const char* needs = family == Family::Object   ? "object"
                          : family == Family::Array  ? "array"
                          : family == Family::String ? "string"
                                                     : "";
      const bool applies = std::any_of(types.begin(), types.end(), [&](const std::string& t) {
        return family == Family::Numeric ? t == "integer" || t == "number" : t == needs;
      });
      if (!applies)
        fail("{}: applies to {} values, but the schema's type does not include it", child(path, k),
             family == Family::Numeric ? "numeric" : needs);
    }
    std::string body;
    for (const auto& t : types) body += (body.empty() ? "" : " | ") + gen_type(t, s, path);
    return types.size() == 1 ? body : rule(path, body);
  }

  std::string gen_type(const std::string& t, const Json& s, const std::string& path) {
    if (t == "object") return object(s, path);
    if (t == "array") return array(s, path);
    if (t == "string") return string(s, path);
    if (t == "integer") return integer(s, path);
    if (t == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k)) fail("{}: bounds are only supported for type integer, not number", child(path, k));
      return prim("number");
    }
    return prim(t);  // boolean, null
  }

  // ---- integers ----

  // An inclusive integer bound from minimum/maximum (exclusive: the exclusive keywords).
  int64_t int_bound(const Json& v, const std::string& where, bool lower, bool exclusive) {
    if (!v.is_number()) fail("{}: must be a number (got {})", where, brief(v));
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))) {
      const int64_t x = v.get<int64_t>();
      if (exclusive && x == (lower ? INT64_MAX : INT64_MIN)) fail("{}: the range is empty", where);
      return exclusive ? (lower ? x + 1 : x - 1) : x;
    }
    const double d = v.get<double>();
    if (!(std::fabs(d) < 9.2e18)) fail("{}: {} is outside the supported integer range", where, brief(v));
    if (lower) return int64_t(exclusive ? std::floor(d) + 1 : std::ceil(d));
    return int64_t(exclusive ? std::ceil(d) - 1 : std::floor(d));
  }

  std::string integer(const Json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    auto tighten = [&](std::optional<int64_t>* b, int64_t x, bool lower) {
      *b = !*b ? x : lower ? std::max(**b, x) : std::min(**b, x);
    };
    for (bool lower : {true, false}) {
      const char* plain = lower ? "minimum" : "maximum";
      const char* excl = lower ? "exclusiveMinimum" : "exclusiveMaximum";
      std::optional<int64_t>* b = lower ? &lo : &hi;
      bool draft4_exclusive = false;
      if (s.contains(excl) && s.at(excl).is_boolean()) {  // draft 4: a flag on minimum/maximum
        draft4_exclusive = s.at(excl).get<bool>();
        if (!s.contains(plain)) fail("{}: a boolean needs '{}' beside it", child(path, excl), plain);
      } else if (s.contains(excl)) {
        tighten(b, int_bound(s.at(excl), child(path, excl), lower, true), lower);
      }
      if (s.contains(plain)) tighten(b, int_bound(s.at(plain), child(path, plain), lower, draft4_exclusive), lower);
    }
    if (!lo && !hi) return prim("integer");
    if (lo && hi && *lo > *hi) fail("{}: no integer is in [{}, {}]", path, *lo, *hi);
    return rule(path, int_range(lo, hi));
  }

  // ---- strings ----

  int64_t count(const Json& s, const char* key, const std::string& path, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s.at(key);
    const std::string where = child(path, key);
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
      fail("{}: must be a non-negative integer (got {})", where, brief(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxCount))
      fail("{}: values above {} are not supported", where, kMaxCount);
    return v.get<int64_t>();
  }

  std::string string(const Json& s, const std::string& path) {
    const int64_t min = count(s, "minLength", path, 0), max = count(s, "maxLength", path, -1);
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      const Json& p = s.at("pattern");
      const std::string where = child(path, "pattern");
      if (!p.is_string()) fail("{}: must be a string", where);
      if (lengths || s.contains("format"))
        fail("{}: a pattern together with format, minLength or maxLength is not supported", where);
      return rule(path, "\"\\\"\" " + join(regex_to_gbnf_expr(p.get<std::string>(), where, true), "\"\\\"\""));
    }
    if (s.contains("format")) {
      const Json& f = s.at("format");
      const std::string where = child(path, "format");
      if (!f.is_string()) fail("{}: must be a string", where);
      if (lengths) fail("{}: a format together with minLength or maxLength is not supported", where);
      const std::string name = f.get<std::string>();
      std::string body;
      if (name == "date")
        body = prim("fmt-date");
      else if (name == "time")
        body = prim("fmt-time");
      else if (name == "date-time")
        body = prim("fmt-date") + " [tT] " + prim("fmt-time");
      else if (name == "uuid")
        body = prim("fmt-uuid");
      else
        fail("{}: '{}' is not supported (supported: date, time, date-time, uuid)", where, name);
      return rule(path, "\"\\\"\" " + body + " \"\\\"\"");
    }
    if (max >= 0 && min > max) fail("{}: minLength {} is above maxLength {}", path, min, max);
    if (min == 0 && max < 0) return prim("string");
    return rule(path, "\"\\\"\" " + join(quantify(prim("char"), min, max), "\"\\\"\""));
  }

  // ---- arrays ----

  std::string array(const Json& s, const std::string& path) {
    AfterText after_text(&leading_);
    std::vector<std::pair<const Json*, std::string>> prefix;  // schema, path
    const Json any = true;
    const Json no = false;
    const Json* tail = nullptr;
    std::string tail_path;
    auto list = [&](const char* key) {
      const Json& l = s.at(key);
      for (size_t i = 0; i < l.size(); ++i) prefix.push_back({&l[i], index(child(path, key), i)});
    };
    if (s.contains("prefixItems")) {
      if (!s.at("prefixItems").is_array()) fail("{}: must be a list of schemas", child(path, "prefixItems"));
      if (s.contains("items") && s.at("items").is_array()) fail("{}: a list beside prefixItems", child(path, "items"));
      list("prefixItems");
    }
    if (s.contains("items") && s.at("items").is_array()) {  // draft 4-2019 tuples
      list("items");
      if (s.contains("additionalItems")) tail = &s.at("additionalItems"), tail_path = child(path, "additionalItems");
    } else {
      if (s.contains("additionalItems"))
        fail("{}: only supported beside a list of items", child(path, "additionalItems"));
      if (s.contains("items")) tail = &s.at("items"), tail_path = child(path, "items");
    }
    if (!tail) tail = prefix.empty() || !strict_ ? &any : &no, tail_path = child(path, "items");
    if (s.contains("uniqueItems")) {
      const Json& u = s.at("uniqueItems");
      if (!u.is_boolean()) fail("{}: must be true or false", child(path, "uniqueItems"));
      if (u.get<bool>()) fail("{}: true is not supported", child(path, "uniqueItems"));
    }
    const size_t k = prefix.size();
    const int64_t min = count(s, "minItems", path, 0);
    int64_t max = count(s, "maxItems", path, -1);
    const bool closed = tail->is_boolean() && !tail->get<bool>();
    if (closed) max = max < 0 ? int64_t(k) : std::min<int64_t>(max, int64_t(k));
    if (min > max && max >= 0) fail("{}: no array has at least {} and at most {} items", path, min, max);
    std::vector<std::string> elems;
    for (size_t i = 0; i < k; ++i) elems.push_back(gen(*prefix[i].first, prefix[i].second));
    const std::string tail_expr = closed ? "" : gen(*tail, tail_path);
    const std::string ws = prim("ws");
    // After i items: the next prefix item (optional once minItems is reached), then the tail.
    std::string rest;
    for (int64_t i = (max < 0 ? int64_t(k) : std::min<int64_t>(max, int64_t(k))); i >= 1; --i) {
      if (i == max) {
        rest = "";
      } else if (i == int64_t(k)) {
        const int64_t lo = std::max<int64_t>(min - i, 0), hi = max < 0 ? -1 : max - i;
        rest = closed ? "" : quantify("( \",\" " + ws + " " + tail_expr + " " + ws + " )", lo, hi);
      } else {
        const std::string item = join("\",\" " + ws + " " + elems[size_t(i)] + " " + ws, rest);
        rest = i >= min ? "( " + item + " )?" : item;
      }
    }
    if (k == 0 && max != 0) {  // no prefix: the loop above did not build the tail
      const int64_t lo = std::max<int64_t>(min - 1, 0), hi = max < 0 ? -1 : max - 1;
      rest = quantify("( \",\" " + ws + " " + tail_expr + " " + ws + " )", lo, hi);
    }
    if (max == 0) return rule(path, "\"[\" " + ws + " \"]\"");
    const std::string first = join((k > 0 ? elems[0] : tail_expr) + " " + ws, rest);
    return rule(path, "\"[\" " + ws + " " + (min == 0 ? "( " + first + " )?" : first) + " \"]\"");
  }

  // ---- objects ----

  struct Member {
    std::string name, value;  // value: GBNF expression
    bool required;
  };

  std::string object(const Json& s, const std::string& path) {
    AfterText after_text(&leading_);
    std::vector<Member> members;
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& r = s.at("required");
      const std::string where = child(path, "required");
      if (!r.is_array()) fail("{}: must be a list of property names", where);
      for (size_t i = 0; i < r.size(); ++i) {
        if (!r[i].is_string()) fail("{}: must be a string (got {})", index(where, i), brief(r[i]));
        if (!required.insert(r[i].get<std::string>()).second)
          fail("{}: '{}' is listed twice", index(where, i), r[i].get<std::string>());
      }
    }
    if (s.contains("properties")) {
      const Json& p = s.at("properties");
      if (!p.is_object()) fail("{}: must be an object of schemas", child(path, "properties"));
      for (const auto& [name, sub] : p.items())
        members.push_back({name, gen(sub, child(child(path, "properties"), name)), required.count(name) > 0});
    }
    // Extra properties: additionalProperties, else (strict) only where the schema declares none.
    const Json* extra = s.contains("additionalProperties") ? &s.at("additionalProperties") : nullptr;
    const std::string extra_path = child(path, "additionalProperties");
    if (extra && !extra->is_boolean() && !extra->is_object())
      fail("{}: must be a schema (got {})", extra_path, brief(*extra));
    const bool extras =
        extra ? !(extra->is_boolean() && !extra->get<bool>()) : !strict_ || !(s.contains("properties") || s.contains("required"));
    const std::string extra_value = !extras ? "" : extra ? gen(*extra, extra_path) : prim("value");
    // Required names that no property declares are checked against additionalProperties.
    if (s.contains("required")) {
      for (const Json& r : s.at("required")) {
        const std::string name = r.get<std::string>();
        if (std::any_of(members.begin(), members.end(), [&](const Member& m) { return m.name == name; })) continue;
        if (extra && !extras)
          fail("{}: '{}' is required but additionalProperties is false", child(path, "required"), name);
        members.push_back({name, extra_value.empty() ? prim("value") : extra_value, true});
      }
    }
    return rule(path, members_rule(members, extras ? extra_value : "", path));
  }

  // "{" ... "}" with the members in order, required ones present, optional ones skippable, then
  // any extra members (extra_value non-empty). first(i): members from i on, none written yet;
  // rest(i): from i on, after one (so a comma comes first).
  std::string members_rule(const std::vector<Member>& members, const std::string& extra_value,
                           const std::string& path) {
    const std::string ws = prim("ws");
    std::vector<std::string> names;
    for (const auto& m : members) names.push_back(m.name);
    std::string first, rest;
    if (!extra_value.empty()) {
      const std::string kv = key_not_in(names, path) + " " + ws + " \":\" " + ws + " " + extra_value + " " + ws;
      rest = "( \",\" " + ws + " " + kv + " )*";
      first = "( " + join(kv, rest) + " )?";
    }
    for (size_t i = members.size(); i-- > 0;) {
      const Member& m = members[i];
      const std::string kv =
          gbnf::literal(Json(m.name).dump(), path) + " " + ws + " \":\" " + ws + " " + m.value + " " + ws;
      const std::string r = join("\",\" " + ws + " " + kv, rest);
      const std::string f = join(kv, rest);
      const std::string hint = fmt::format("{}-{}", path == "$" ? "obj" : path.substr(2), i);
      const std::string new_rest = m.required ? r : rest.empty() ? "( " + r + " )?" : r + " | " + rest;
      const std::string new_first = m.required ? f : first.empty() ? "( " + f + " )?" : f + " | " + first;
      if (i == 0) {
        first = new_first;
      } else {  // rest(i) is used twice below; first(i) only when member i-1 may be left out
        rest = rule("$." + hint + "-rest", new_rest);
        first = members[i - 1].required ? "" : rule("$." + hint, new_first);
      }
    }
    if (members.empty()) return "\"{\" " + ws + " " + join(first, "\"}\"");
    return "\"{\" " + ws + " ( " + first + " ) \"}\"";
  }

  // A quoted property name that is none of `names` (a trie of them, one rule per node). Names
  // are matched in their one canonical encoding, so an escape cannot sneak a declared one in.
  std::string key_not_in(const std::vector<std::string>& names, const std::string& path) {
    if (names.empty()) return prim("string");
    struct Node {
      std::map<uint32_t, size_t> kids;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const auto& n : names) {
      size_t at = 0;
      for (uint32_t cp : gbnf::decode_utf8(n, path)) {
        auto it = trie[at].kids.find(cp);
        if (it == trie[at].kids.end()) {
          trie.push_back({});
          it = trie[at].kids.emplace(cp, trie.size() - 1).first;
        }
        at = it->second;
      }
      trie[at].terminal = true;
    }
    if (key_char_.empty()) {
      key_char_ = unique("key-char");
      add(key_char_, gbnf::json_chars({{0, gbnf::kMaxCodePoint}}, true));
    }
    std::vector<std::string> node_names(trie.size());
    for (auto& n : node_names) n = unique(path == "$" ? "other-key" : path.substr(2) + "-other-key");
    for (size_t t = 0; t < trie.size(); ++t) {
      std::string body;
      CodeRanges used;
      for (const auto& [cp, kid] : trie[t].kids) {
        body += (body.empty() ? "" : " | ") + gbnf::json_chars({{cp, cp}}, true) + " " + node_names[kid];
        used.push_back({cp, cp});
      }
      const CodeRanges others = gbnf::complement(used);
      if (!others.empty()) body += (body.empty() ? "" : " | ") + gbnf::json_chars(others, true) + " " + key_char_ + "*";
      add(node_names[t], trie[t].terminal ? body : "( " + body + " )?");
    }
    return "\"\\\"\" " + node_names[0] + " \"\\\"\"";
  }

  const Json& root_;
  bool strict_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_, prims_done_, leading_;
  std::map<std::string, std::string> defs_;  // reference -> rule
  std::string key_char_;                     // any character of a property name (canonical)
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, bool strict) {
  return Converter(schema, strict).run();
}

std::string json_schema_to_gbnf(const nlohmann::json& schema, bool strict) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()), strict);
}

std::string json_value_gbnf() { return Converter(Json(), true).run_prim("value"); }

std::string json_object_gbnf() { return Converter(Json(), true).run_prim("object"); }

std::string choice_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) fail("choice: needs at least one string");
  std::vector<std::string> alts;
  bool empty = false;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) {
      empty = true;
      continue;
    }
    std::string lit = gbnf::literal(choices[i], fmt::format("choice[{}]", i));
    if (std::find(alts.begin(), alts.end(), lit) == alts.end()) alts.push_back(std::move(lit));
  }
  std::string body;
  for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
  if (body.empty()) return "root ::= \"\"\n";
  return "root ::= " + (empty ? "( " + body + " )?" : body) + "\n";
}

}  // namespace eaglet::constrain
