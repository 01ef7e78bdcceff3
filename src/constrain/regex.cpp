#include "constrain/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace eaglet::constrain {
namespace gbnf {

CodeRanges normalize(CodeRanges r) {
  std::sort(r.begin(), r.end());
  CodeRanges out;
  for (auto [a, b] : r) {
    if (a > b) continue;
    if (!out.empty() && a <= out.back().second + 1)
      out.back().second = std::max(out.back().second, b);
    else
      out.push_back({a, b});
  }
  return out;
}

CodeRanges complement(const CodeRanges& r) {
  CodeRanges out;
  uint32_t next = 0;
  for (auto [a, b] : normalize(r)) {
    if (a > next) out.push_back({next, a - 1});
    next = b + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

bool contains(const CodeRanges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [&](auto ab) { return ab.first <= cp && cp <= ab.second; });
}

static CodeRanges intersect(const CodeRanges& a, const CodeRanges& b) {
  return complement(normalize([&] {
    CodeRanges u = complement(a), cb = complement(b);
    u.insert(u.end(), cb.begin(), cb.end());
    return u;
  }()));
}

std::vector<uint32_t> decode_utf8(std::string_view s, const std::string& where) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) fail("{}: invalid UTF-8 at byte {}", where, i);
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const uint8_t c = uint8_t(s[i + k]);
      if ((c >> 6) != 2) fail("{}: invalid UTF-8 at byte {}", where, i);
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
    if (cp < kMin[n] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
      fail("{}: invalid UTF-8 at byte {}", where, i);
    out.push_back(cp);
    i += size_t(n);
  }
  return out;
}

void append_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += char(cp);
  } else if (cp < 0x800) {
    *out += char(0xC0 | (cp >> 6));
    *out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += char(0xE0 | (cp >> 12));
    *out += char(0x80 | ((cp >> 6) & 0x3F));
    *out += char(0x80 | (cp & 0x3F));
  } else {
    *out += char(0xF0 | (cp >> 18));
    *out += char(0x80 | ((cp >> 12) & 0x3F));
    *out += char(0x80 | ((cp >> 6) & 0x3F));
    *out += char(0x80 | (cp & 0x3F));
  }
}

// Non-ASCII code points are written as \u / \U escapes so that the grammar text stays ASCII.
static std::string escape_non_ascii(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return fmt::format("\\x{:02X}", cp);
  if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

std::string literal(std::string_view s, const std::string& where) {
  std::string out = "\"";
  for (uint32_t cp : decode_utf8(s, where)) {
    if (cp == '"')
      out += "\\\"";
    else if (cp == '\\')
      out += "\\\\";
    else if (cp == '\n')
      out += "\\n";
    else if (cp == '\r')
      out += "\\r";
    else if (cp == '\t')
      out += "\\t";
    else if (cp < 0x20 || cp >= 0x7F)
      out += escape_non_ascii(cp);
    else
      out += char(cp);
  }
  return out + "\"";
}

static std::string class_char(uint32_t cp) {
  // Characters that mean something inside [...] are written as hex escapes.
  if (cp == ']' || cp == '\\' || cp == '-' || cp == '^' || cp == '[') return fmt::format("\\x{:02X}", cp);
  if (cp == '\n') return "\\n";
  if (cp == '\t') return "\\t";
  if (cp == '\r') return "\\r";
  if (cp < 0x20 || cp >= 0x7F) return escape_non_ascii(cp);
  return std::string(1, char(cp));
}

static std::string class_body(const CodeRanges& set) {
  std::string out;
  for (auto [a, b] : set) {
    out += class_char(a);
    if (b == a + 1)
      out += class_char(b);
    else if (b > a)
      out += "-" + class_char(b);
  }
  return out;
}

std::string char_class(const CodeRanges& set0) {
  const CodeRanges set = normalize(set0);
  EAGLET_CHECK(!set.empty(), "char_class: empty set");  // callers never build one
  const CodeRanges comp = complement(set);
  if (comp.empty()) return ".";
  if (set.size() == 1 && set[0].first == set[0].second) {  // one character: a literal reads better
    std::string one;
    append_utf8(&one, set[0].first);
    return literal(one);
  }
  const bool negate = comp.size() < set.size() || (comp.size() == set.size() && set.back().second == kMaxCodePoint);
  return negate ? "[^" + class_body(comp) + "]" : "[" + class_body(set) + "]";
}

// \u00XX escapes for the control characters in `set`, one alternative per first hex digit.
static void unicode_escapes(const CodeRanges& set, bool canonical, std::vector<std::string>* alts) {
  static const char* kShort = "\b\f\n\r\t";
  for (int hi = 0; hi < 2; ++hi) {
    CodeRanges lows;
    for (uint32_t lo = 0; lo < 16; ++lo) {
      const uint32_t cp = uint32_t(hi) * 16 + lo;
      const bool has_short = cp != 0 && std::string_view(kShort).find(char(cp)) != std::string_view::npos;
      if (!contains(set, cp) || (canonical && has_short)) continue;
      const uint32_t digit = lo < 10 ? '0' + lo : 'a' + lo - 10;
      lows.push_back({digit, digit});
      if (!canonical && lo >= 10) lows.push_back({digit - 32, digit - 32});  // upper case too
    }
    if (!lows.empty()) alts->push_back(fmt::format("\"\\\\u00{}\" {}", hi, char_class(lows)));
  }
}

std::string json_chars(const CodeRanges& set0, bool canonical) {
  const CodeRanges set = normalize(set0);
  std::vector<std::string> alts;
  // Raw: everything but the quote, the backslash and control characters (JSON forbids those).
  const CodeRanges raw = intersect(set, complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  if (!raw.empty()) alts.push_back(char_class(raw));
  CodeRanges letters;
  static const std::pair<uint32_t, uint32_t> kEscapes[] = {{'"', '"'},  {'\\', '\\'}, {'/', '/'},  {'\b', 'b'},
                                                           {'\f', 'f'}, {'\n', 'n'},  {'\r', 'r'}, {'\t', 't'}};
  for (auto [cp, letter] : kEscapes)
    if (contains(set, cp) && !(canonical && cp == '/')) letters.push_back({letter, letter});
  if (!letters.empty()) alts.push_back("\"\\\\\" " + char_class(letters));
  unicode_escapes(set, canonical, &alts);
  EAGLET_CHECK(!alts.empty(), "json_chars: empty set");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

}  // namespace gbnf

namespace {

using gbnf::CodeRanges;

const CodeRanges kDigit = {{'0', '9'}};
const CodeRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's \s: white space and line terminators.
const CodeRanges kSpace = {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                           {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
constexpr int kMaxRepeat = 100000;  // a sanity bound on {m,n}: each count becomes grammar rules

struct Node {
  enum class Kind { Set, Seq, Alt, Repeat } kind = Kind::Seq;
  CodeRanges set;          // Set
  std::vector<Node> kids;  // Seq, Alt, Repeat (one)
  int min = 0, max = -1;   // Repeat; max -1: unbounded
};

Node set_node(CodeRanges set) { return Node{Node::Kind::Set, gbnf::normalize(std::move(set)), {}, 0, 0}; }

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::Kind::Set:
      return false;
    case Node::Kind::Seq:
      return std::all_of(n.kids.begin(), n.kids.end(), nullable);
    case Node::Kind::Alt:
      return std::any_of(n.kids.begin(), n.kids.end(), nullable);
    case Node::Kind::Repeat:
      return n.min == 0 || nullable(n.kids[0]);
  }
  return false;
}

// A recursive-descent parser over the pattern's code points.
class RegexParser {
 public:
  RegexParser(const std::string& pattern, const std::string& where)
      : cps_(gbnf::decode_utf8(pattern, where)), where_(where) {}

  Node parse() {
    Node n = alternation(0);
    if (!at_end()) error("unmatched ')'");  // the only character that stops the top level early
    return n;
  }

 private:
  [[noreturn]] void error(const std::string& what) const { fail("{}: {} at offset {}", where_, what, pos_); }
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek(size_t k = 0) const { return pos_ + k < cps_.size() ? cps_[pos_ + k] : 0xFFFFFFFFu; }

  Node alternation(int depth) {
    Node alt;
    alt.kind = Node::Kind::Alt;
    alt.kids.push_back(sequence(depth));
    while (peek() == '|') {
      ++pos_;
      alt.kids.push_back(sequence(depth));
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  // The whole text must match, so ^ and $ add nothing where they are allowed; elsewhere they
  // would need lookaround-like treatment.
  Node sequence(int depth) {
    Node seq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '^') {
        if (depth != 0 || !seq.kids.empty()) error("'^' is only supported at the start of the pattern");
        ++pos_;
      } else if (peek() == '$') {
        if (depth != 0 || !(pos_ + 1 == cps_.size() || peek(1) == '|'))
          error("'$' is only supported at the end of the pattern");
        ++pos_;
      } else {
        seq.kids.push_back(quantified(atom(depth)));
      }
    }
    return seq;
  }

  Node atom(int depth) {
    const uint32_t c = peek();
    if (c == '(') return group(depth);
    if (c == '[') return char_class();
    if (c == '\\') return escape_atom();
    if (c == '*' || c == '+' || c == '?' || (c == '{' && quantifier(nullptr, nullptr))) error("nothing to repeat");
    ++pos_;
    if (c == '.') return set_node(gbnf::complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    return set_node({{c, c}});
  }

  Node group(int depth) {
    ++pos_;
    if (peek() == '?') {
      const uint32_t k = peek(1), k2 = peek(2);
      if (k == '=' || k == '!' || (k == '<' && (k2 == '=' || k2 == '!'))) error("lookarounds are not supported");
      if (k == ':') {
        pos_ += 2;
      } else if (k == '<' || (k == 'P' && k2 == '<')) {  // named group: (?<name>...) or Python's (?P<name>...)
        while (!at_end() && peek() != '>') ++pos_;
        if (at_end()) error("unterminated group name");
        ++pos_;
      } else {
        error("this kind of group (inline flags, backreference, ...) is not supported");
      }
    }
    Node inner = alternation(depth + 1);
    if (peek() != ')') error("missing ')'");
    ++pos_;
    return inner;
  }

  Node escape_atom() {
    ++pos_;
    const uint32_t c = peek();
    if (c == 'b' || c == 'B' || c == 'A' || c == 'Z' || c == 'z' || c == 'G')
      error("anchors inside the pattern are not supported");
    return set_node(escape_set(false));
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i, ++pos_) {
      const uint32_t c = peek();
      const int d = c >= '0' && c <= '9'   ? int(c - '0')
                    : c >= 'a' && c <= 'f' ? int(c - 'a' + 10)
                    : c >= 'A' && c <= 'F' ? int(c - 'A' + 10)
                                           : -1;
      if (d < 0) error("bad hex escape");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // The set an escape stands for; pos_ is just after the backslash. in_class: \b is a backspace.
  CodeRanges escape_set(bool in_class) {
    if (at_end()) error("the pattern ends with '\\'");
    const size_t backslash = pos_ - 1;
    const uint32_t c = cps_[pos_++];
    switch (c) {
      case 'd':
        return kDigit;
      case 'D':
        return gbnf::complement(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return gbnf::complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return gbnf::complement(kSpace);
      case 'n':
        return {{'\n', '\n'}};
      case 'r':
        return {{'\r', '\r'}};
      case 't':
        return {{'\t', '\t'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        break;
      case '0':
        if (peek() >= '0' && peek() <= '9') break;  // octal escapes
        return {{0, 0}};
      case 'x': {
        const uint32_t v = hex_digits(2);
        return {{v, v}};
      }
      case 'u': {
        if (peek() == '{') break;
        uint32_t v = hex_digits(4);
        // A surrogate pair written as two escapes is one code point.
        if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t save = pos_;
          pos_ += 2;
          const uint32_t lo = hex_digits(4);
          if (lo >= 0xDC00 && lo <= 0xDFFF)
            return {{0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00), 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)}};
          pos_ = save;
        }
        if (v >= 0xD800 && v <= 0xDFFF) error("lone surrogate escape");
        return {{v, v}};
      }
      default:
        if (c >= 0x80 || !std::isalnum(int(c))) return {{c, c}};  // escaped punctuation is itself
    }
    pos_ = backslash;
    if (c >= '1' && c <= '9') error("backreferences are not supported");
    error(fmt::format("escape '\\{}' is not supported", char(c)));
  }

  Node char_class() {
    ++pos_;
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    if (peek() == ']') error("a ']' first in a class is ambiguous (empty class or literal); write '\\]'");
    CodeRanges set;
    while (peek() != ']') {
      if (at_end()) error("missing ']'");
      const CodeRanges lo = class_atom();
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < cps_.size()) {
        ++pos_;
        const CodeRanges hi = class_atom();
        if (lo.size() != 1 || hi.size() != 1 || lo[0].first != lo[0].second || hi[0].first != hi[0].second)
          error("a class range needs a single character at each end");
        if (lo[0].first > hi[0].first) error("class range out of order");
        set.push_back({lo[0].first, hi[0].first});
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    ++pos_;
    set = gbnf::normalize(set);
    if (negated) set = gbnf::complement(set);
    if (set.empty()) error("the class matches nothing");
    return set_node(set);
  }

  CodeRanges class_atom() {
    if (peek() != '\\') {
      const uint32_t c = cps_[pos_++];
      return {{c, c}};
    }
    ++pos_;
    return escape_set(true);
  }

  // A {m}, {m,}, {m,n} or {,n} quantifier at pos_ (moved past it when min is given).
  bool quantifier(int* min, int* max) {
    size_t p = pos_ + 1;
    auto number = [&](int* out) {
      const size_t start = p;
      long v = 0;
      while (p < cps_.size() && cps_[p] >= '0' && cps_[p] <= '9') {
        v = std::min<long>(v * 10 + long(cps_[p] - '0'), kMaxRepeat + 1L);
        ++p;
      }
      *out = int(v);
      return p > start;
    };
    int lo = 0, hi = -1;
    const bool has_lo = number(&lo);
    if (p < cps_.size() && cps_[p] == ',') {
      ++p;
      if (!number(&hi)) hi = -1;
      if (!has_lo && hi < 0) return false;
    } else {
      if (!has_lo) return false;
      hi = lo;
    }
    if (p >= cps_.size() || cps_[p] != '}') return false;
    if (min) {
      if (lo > kMaxRepeat || hi > kMaxRepeat)
        error(fmt::format("repetition counts above {} are not supported", kMaxRepeat));
      if (hi >= 0 && lo > hi) error("quantifier {m,n} with m > n");
      *min = lo, *max = hi, pos_ = p + 1;
    }
    return true;
  }

  Node quantified(Node atom) {
    int min = 0, max = -1;
    const uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    } else if (!(c == '{' && quantifier(&min, &max))) {
      return atom;
    }
    if (peek() == '?')
      ++pos_;  // lazy: the set of full matches is the same
    else if (peek() == '+')
      error("possessive quantifiers are not supported");
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && quantifier(nullptr, nullptr)))
      error("nothing to repeat");
    if (max < 0 && nullable(atom))
      error("unbounded repetition of something that can match the empty text is not supported");
    return Node{Node::Kind::Repeat, {}, {std::move(atom)}, min, max};
  }

  std::vector<uint32_t> cps_;
  std::string where_;
  size_t pos_ = 0;
};

// Whether GBNF text is a single term (a literal, a class, a group, `.`): no top-level space.
bool single_term(const std::string& s) {
  int depth = 0;
  bool quoted = false, bracket = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if ((quoted || bracket) && c == '\\') {
      ++i;
    } else if (quoted) {
      quoted = c != '"';
    } else if (bracket) {
      bracket = c != ']';
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[') {
      bracket = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == ' ' && depth == 0) {
      return false;
    }
  }
  return true;
}

// GBNF text for a node; "" when it matches only the empty text.
std::string emit(const Node& n, bool json) {
  switch (n.kind) {
    case Node::Kind::Set:
      return json ? gbnf::json_chars(n.set) : gbnf::char_class(n.set);
    case Node::Kind::Seq: {
      std::string out;
      for (const Node& k : n.kids) {
        const std::string s = emit(k, json);
        if (!s.empty()) out += (out.empty() ? "" : " ") + s;
      }
      return out;
    }
    case Node::Kind::Alt: {
      std::string out;
      bool has_empty = false;
      for (const Node& k : n.kids) {
        const std::string s = emit(k, json);
        if (s.empty())
          has_empty = true;
        else
          out += (out.empty() ? "" : " | ") + s;
      }
      if (out.empty()) return out;
      return "(" + out + (has_empty ? ")?" : ")");
    }
    case Node::Kind::Repeat: {
      const std::string body = emit(n.kids[0], json);
      if (body.empty() || n.max == 0) return "";
      const std::string term = single_term(body) ? body : "(" + body + ")";
      if (n.min == 1 && n.max == 1) return body;
      if (n.min == 0 && n.max == -1) return term + "*";
      if (n.min == 1 && n.max == -1) return term + "+";
      if (n.min == 0 && n.max == 1) return term + "?";
      if (n.min == n.max) return fmt::format("{}{{{}}}", term, n.min);
      if (n.max == -1) return fmt::format("{}{{{},}}", term, n.min);
      return fmt::format("{}{{{},{}}}", term, n.min, n.max);
    }
  }
  return "";
}

}  // namespace

std::string regex_to_gbnf_expr(const std::string& pattern, const std::string& where, bool json_content) {
  return emit(RegexParser(pattern, where).parse(), json_content);
}

std::string regex_to_gbnf(const std::string& pattern, const std::string& where) {
  const std::string expr = regex_to_gbnf_expr(pattern, where, false);
  return "root ::= " + (expr.empty() ? std::string("\"\"") : expr) + "\n";
}

}  // namespace eaglet::constrain
