#include "constrain/grammar.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <tuple>

#include "core/error.h"

namespace eaglet::constrain {

bool Grammar::Element::matches(uint32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges)
    if (cp >= lo && cp <= hi) {
      in = true;
      break;
    }
  return in != negated;
}

// A recursive-descent parser of GBNF. Rules are numbered as they are first named (defined or
// referenced); repetitions and groups become generated rules named after their parent.
class GrammarParser {
 public:
  GrammarParser(const std::string& text, std::string where, std::string start)
      : s_(text), where_(std::move(where)), start_(std::move(start)) {}

  std::shared_ptr<const Grammar> run() {
    auto g = std::make_shared<Grammar>();
    g_ = g.get();
    skip();
    while (i_ < s_.size()) {
      const size_t at = i_;
      const std::string name = identifier();
      skip();
      if (s_.compare(i_, 3, "::=") != 0) error(at, "expected '::=' after rule name '" + name + "'");
      i_ += 3;
      const int r = rule_id(name);
      if (defined_[size_t(r)]) error(at, "rule '" + name + "' is defined twice");
      defined_[size_t(r)] = true;
      g_->rules_[size_t(r)].alternatives = alternatives(name, false);
    }
    for (size_t r = 0; r < g_->rules_.size(); ++r)
      if (!defined_[r]) error(first_use_[r], "rule '" + g_->rules_[r].name + "' is used but not defined");
    const auto root = ids_.find(start_);
    if (root == ids_.end()) fail("{}: no '{}' rule (the start of the grammar)", where_, start_);
    g_->root_ = root->second;
    check_left_recursion();
    return g;
  }

 private:
  using Sequence = Grammar::Sequence;
  using Element = Grammar::Element;

  [[noreturn]] void error(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < s_.size(); ++k) {
      if (s_[k] == '\n') ++line, col = 1;
      else ++col;
    }
    fail("{}: line {}, column {}: {}", where_, line, col, what);
  }

  // Whitespace, newlines and # comments.
  void skip() {
    while (i_ < s_.size()) {
      if (s_[i_] == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r') {
        ++i_;
      } else {
        break;
      }
    }
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }
  std::string identifier() {
    const size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == b) error(b, "expected a rule name");
    return s_.substr(b, i_ - b);
  }
  // Whether a new rule definition (`name ::=`) starts at the cursor: it ends the current one.
  bool at_definition() const {
    size_t k = i_;
    while (k < s_.size() && name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t' || s_[k] == '\n' || s_[k] == '\r')) ++k;
    return s_.compare(k, 3, "::=") == 0;
  }

  int rule_id(const std::string& name) {
    auto [it, fresh] = ids_.emplace(name, int(g_->rules_.size()));
    if (fresh) {
      g_->rules_.push_back({name, {}});
      defined_.push_back(false);
      first_use_.push_back(i_);
    }
    return it->second;
  }
  int new_rule(const std::string& base) {
    if (g_->rules_.size() >= kMaxRules)
      error(i_, fmt::format("the grammar needs more than {} rules (repetitions expand into rules)", kMaxRules));
    const int id = rule_id(base + "_" + std::to_string(generated_++));
    defined_[size_t(id)] = true;
    return id;
  }

  std::vector<Sequence> alternatives(const std::string& rule, bool nested) {
    std::vector<Sequence> alts{sequence(rule, nested)};
    while (i_ < s_.size() && s_[i_] == '|') {
      ++i_;
      skip();
      alts.push_back(sequence(rule, nested));
    }
    return alts;
  }

  Sequence sequence(const std::string& rule, bool nested) {
    Sequence seq;
    skip();
    while (i_ < s_.size() && s_[i_] != '|' && s_[i_] != ')' && !(!nested && at_definition())) {
      const size_t at = i_;
      Sequence term = this->term(rule);
      skip();
      if (i_ < s_.size() && (s_[i_] == '*' || s_[i_] == '+' || s_[i_] == '?' || s_[i_] == '{'))
        term = {Element{Element::Kind::Rule, {}, false, repeat(rule, term, at)}};
      seq.insert(seq.end(), term.begin(), term.end());
      skip();
    }
    if (nested && i_ >= s_.size()) error(s_.size(), "unclosed '('");
    return seq;
  }

  Sequence term(const std::string& rule) {
    const size_t at = i_;
    const char c = s_[i_];
    if (c == '"') return literal();
    if (c == '[') return {char_class()};
    if (c == '.') {
      ++i_;
      return {Element{Element::Kind::Chars, {}, true, -1}};
    }
    if (c == '(') {
      ++i_;
      const int id = new_rule(rule);
      auto alts = alternatives(rule, true);
      if (i_ >= s_.size() || s_[i_] != ')') error(at, "unclosed '('");
      ++i_;
      g_->rules_[size_t(id)].alternatives = std::move(alts);
      return {Element{Element::Kind::Rule, {}, false, id}};
    }
    if (name_char(c)) return {Element{Element::Kind::Rule, {}, false, rule_id(identifier())}};
    error(at, std::string("unexpected '") + c + "'");
  }

  // X*, X+, X?, X{m}, X{m,}, X{m,n} as rules over `x` (a term).
  int repeat(const std::string& rule, const Sequence& x, size_t at) {
    int lo = 0, hi = -1;  // hi -1: unbounded
    const char op = s_[i_++];
    if (op == '+') lo = 1;
    else if (op == '?') hi = 1;
    else if (op == '{') std::tie(lo, hi) = bounds(at);
    EAGLET_CHECK(hi < 0 || hi >= lo, "{}: repetition {{{},{}}} has max below min", where_, lo, hi);
    // Counts as large as a JSON schema's (maxLength 100000) are fine; the grammar as a whole is
    // bounded below, so that a short text cannot ask for billions of rules.
    if (lo > kMaxCount || hi > kMaxCount) error(at, fmt::format("repetition bounds above {}", kMaxCount));
    elements_ += (size_t(lo) + size_t(std::max(hi - lo, 1))) * (x.size() + 1);
    if (elements_ > kMaxElements)
      error(at, fmt::format("the grammar needs more than {} elements (repetitions expand into copies)", kMaxElements));
    const Element ref{Element::Kind::Rule, {}, false, -1};
    auto rule_ref = [&](int id) { Element e = ref; e.rule = id; return e; };
    // The optional tail: unbounded X* (X tail | empty), or nested (X (X ...)?)? up to hi - lo.
    int tail = -1;
    if (hi < 0) {
      tail = new_rule(rule);
      Sequence more = x;
      more.push_back(rule_ref(tail));
      g_->rules_[size_t(tail)].alternatives = {more, {}};
    } else {
      for (int k = 0; k < hi - lo; ++k) {
        const int id = new_rule(rule);
        Sequence more = x;
        if (tail >= 0) more.push_back(rule_ref(tail));
        g_->rules_[size_t(id)].alternatives = {more, {}};
        tail = id;
      }
    }
    const int id = new_rule(rule);
    Sequence all;
    for (int k = 0; k < lo; ++k) all.insert(all.end(), x.begin(), x.end());
    if (tail >= 0) all.push_back(rule_ref(tail));
    g_->rules_[size_t(id)].alternatives = {all};
    return id;
  }
  std::pair<int, int> bounds(size_t at) {
    auto number = [&] {
      const size_t b = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (b == i_ || i_ - b > 6) error(at, "expected a repetition count");
      return std::stoi(s_.substr(b, i_ - b));
    };
    skip();
    const int lo = number();
    skip();
    int hi = lo;
    if (i_ < s_.size() && s_[i_] == ',') {
      ++i_;
      skip();
      hi = i_ < s_.size() && s_[i_] == '}' ? -1 : number();
      skip();
    }
    if (i_ >= s_.size() || s_[i_] != '}') error(at, "expected '}'");
    ++i_;
    return {lo, hi};
  }

  // One code point of a literal or class, with escapes.
  uint32_t code_point(size_t at) {
    if (i_ >= s_.size()) error(at, "unterminated literal or class");
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      if (++i_ >= s_.size()) error(at, "dangling '\\'");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return hex(2, at);
        case 'u': return hex(4, at);
        case 'U': return hex(8, at);
        default: return static_cast<unsigned char>(e);  // \\ \" \] \[ \- and any other character as itself
      }
    }
    // UTF-8 in the grammar text itself.
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len; ++k) {
      if (i_ + size_t(k) >= s_.size()) error(at, "truncated UTF-8 in the grammar");
      cp = (cp << 6) | (static_cast<unsigned char>(s_[i_ + size_t(k)]) & 0x3F);
    }
    i_ += size_t(len);
    return cp;
  }
  uint32_t hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) error(at, "bad hex escape");
      v = v * 16 + uint32_t(std::stoi(std::string(1, s_[i_]), nullptr, 16));
    }
    return v;
  }

  Sequence literal() {
    const size_t at = i_++;
    Sequence seq;
    while (i_ < s_.size() && s_[i_] != '"') {
      const uint32_t cp = code_point(at);
      seq.push_back(Element{Element::Kind::Chars, {{cp, cp}}, false, -1});
    }
    if (i_ >= s_.size()) error(at, "unterminated string literal");
    ++i_;
    return seq;
  }

  Element char_class() {
    const size_t at = i_++;
    Element e{Element::Kind::Chars, {}, false, -1};
    if (i_ < s_.size() && s_[i_] == '^') e.negated = true, ++i_;
    while (i_ < s_.size() && s_[i_] != ']') {
      const uint32_t lo = code_point(at);
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = code_point(at);
        if (hi < lo) error(at, "character range with its end below its start");
      }
      e.ranges.push_back({lo, hi});
    }
    if (i_ >= s_.size()) error(at, "unterminated character class");
    ++i_;
    return e;
  }

  // A rule that can reach itself without consuming a character loops a top-down matcher.
  void check_left_recursion() const {
    const auto& rules = g_->rules_;
    const size_t n = rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Sequence& alt : rules[r].alternatives)
          if (std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
                return e.kind == Element::Kind::Rule && nullable[size_t(e.rule)];
              })) {
            nullable[r] = changed = true;
            break;
          }
      }
    }
    // first[r]: rules r may begin with (before consuming anything).
    std::vector<std::vector<int>> first(n);
    for (size_t r = 0; r < n; ++r)
      for (const Sequence& alt : rules[r].alternatives)
        for (const Element& e : alt) {
          if (e.kind == Element::Kind::Chars) break;
          first[r].push_back(e.rule);
          if (!nullable[size_t(e.rule)]) break;
        }
    std::vector<int> state(n, 0);  // 0 unseen, 1 on the path, 2 done
    std::function<void(int)> visit = [&](int r) {
      state[size_t(r)] = 1;
      for (int next : first[size_t(r)]) {
        if (state[size_t(next)] == 1)
          fail("{}: rule '{}' is left-recursive (it can reach itself before matching a character)", where_,
               rules[size_t(next)].name);
        if (state[size_t(next)] == 0) visit(next);
      }
      state[size_t(r)] = 2;
    };
    for (size_t r = 0; r < n; ++r)
      if (state[r] == 0) visit(int(r));
  }

  static constexpr int kMaxCount = 100000;
  static constexpr size_t kMaxRules = 1000000, kMaxElements = 4000000;
  size_t elements_ = 0;
  const std::string& s_;
  std::string where_, start_;
  size_t i_ = 0;
  Grammar* g_ = nullptr;
  std::map<std::string, int> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  int generated_ = 0;
};

std::shared_ptr<const Grammar> Grammar::parse(const std::string& text, const std::string& where, const std::string& start) {
  static std::atomic<uint64_t> next_id{1};
  auto g = std::const_pointer_cast<Grammar>(GrammarParser(text, where, start).run());
  g->id_ = next_id++;
  return g;
}

// --- Matcher ---------------------------------------------------------------------------------

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  for (size_t a = 0; a < g_->rules()[size_t(g_->root())].alternatives.size(); ++a) {
    Stack s{{g_->root(), int(a), 0}};
    expand(*g_, s, &stacks_);
  }
}

// Brings `s` to a state whose top is a character element (or to the empty stack, the end of the
// grammar), following rule references into every alternative; appends each result to `out`.
void Matcher::expand(const Grammar& g, Stack s, std::vector<Stack>* out) {
  while (!s.empty()) {
    const Pos p = s.back();
    const Grammar::Sequence& seq = g.rules()[size_t(p.rule)].alternatives[size_t(p.alt)];
    if (size_t(p.index) >= seq.size()) {  // this alternative is done: back to its caller
      s.pop_back();
      continue;
    }
    const Grammar::Element& e = seq[size_t(p.index)];
    if (e.kind == Grammar::Element::Kind::Chars) break;
    // The caller resumes after the reference; the callee starts in each alternative.
    s.back().index++;
    if (size_t(s.back().index) >= seq.size()) s.pop_back();
    const auto& alts = g.rules()[size_t(e.rule)].alternatives;
    for (size_t a = 1; a < alts.size(); ++a) {
      Stack t = s;
      t.push_back({e.rule, int(a), 0});
      expand(g, std::move(t), out);
    }
    s.push_back({e.rule, 0, 0});
  }
  out->push_back(std::move(s));
}

bool Matcher::step_code_point(uint32_t cp) {
  std::vector<Stack> next;
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Pos p = s.back();
    const Grammar::Element& e = g_->rules()[size_t(p.rule)].alternatives[size_t(p.alt)][size_t(p.index)];
    if (!e.matches(cp)) continue;
    Stack t = s;
    t.back().index++;
    expand(*g_, std::move(t), &next);
  }
  if (next.empty()) return false;
  auto less = [](const Stack& a, const Stack& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](const Pos& x, const Pos& y) {
      return std::tie(x.rule, x.alt, x.index) < std::tie(y.rule, y.alt, y.index);
    });
  };
  std::sort(next.begin(), next.end(), less);
  next.erase(std::unique(next.begin(), next.end()), next.end());
  stacks_ = std::move(next);
  return true;
}

namespace {
// The length of the UTF-8 sequence a lead byte starts (0: not a lead byte).
int utf8_length(unsigned char c) { return c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0; }
// The least code point a sequence of `len` bytes may hold (fewer bytes would do: overlong).
uint32_t utf8_least(int len) { return len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000; }
bool surrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }
}  // namespace

bool Matcher::partial_viable() const { return could_complete(pending_); }

// The code points an incomplete sequence can still become form one range [lo, hi]; some stack must
// be able to match one of them.
bool Matcher::could_complete(std::string_view lead) const {
  const int len = utf8_length(static_cast<unsigned char>(lead[0]));
  const int missing = len - int(lead.size());
  if (len < 2 || missing < 1) return false;
  uint32_t v = static_cast<unsigned char>(lead[0]) & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < lead.size(); ++k) v = (v << 6) | (static_cast<unsigned char>(lead[k]) & 0x3F);
  // Overlong forms and surrogates are not UTF-8.
  const uint32_t lo = std::max(utf8_least(len), v << (6 * missing));
  const uint32_t hi = std::min<uint32_t>(0x10FFFF, (v << (6 * missing)) | ((1u << (6 * missing)) - 1));
  if (lo > hi || (surrogate(lo) && surrogate(hi))) return false;
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Pos p = s.back();
    const Grammar::Element& e = g_->rules()[size_t(p.rule)].alternatives[size_t(p.alt)][size_t(p.index)];
    if (!e.negated) {
      for (const auto& [a, b] : e.ranges)
        if (a <= hi && b >= lo) return true;
      continue;
    }
    // Negated: viable unless the ranges cover all of [lo, hi].
    auto r = e.ranges;
    std::sort(r.begin(), r.end());
    uint64_t covered = lo;  // first code point not yet known to be covered
    for (const auto& [a, b] : r) {
      if (a > covered) break;
      covered = std::max<uint64_t>(covered, uint64_t(b) + 1);
    }
    if (covered <= hi) return true;
  }
  return false;
}

bool Matcher::accept(std::string_view bytes) {
  Matcher m = *this;
  for (char ch : bytes) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (m.pending_.empty()) {
      const int len = utf8_length(c);
      if (len == 0) return false;
      if (len == 1) {
        if (!m.step_code_point(c)) return false;
        continue;
      }
      m.pending_.push_back(ch);
      continue;
    }
    if ((c & 0xC0) != 0x80) return false;
    m.pending_.push_back(ch);
    const int len = utf8_length(static_cast<unsigned char>(m.pending_[0]));
    if (int(m.pending_.size()) < len) continue;
    uint32_t cp = static_cast<unsigned char>(m.pending_[0]) & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < m.pending_.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(m.pending_[k]) & 0x3F);
    m.pending_.clear();
    // A whole sequence in one piece never went through partial_viable's checks.
    if (cp < utf8_least(len) || cp > 0x10FFFF || surrogate(cp) || !m.step_code_point(cp)) return false;
  }
  if (!m.pending_.empty() && !m.partial_viable()) return false;
  *this = std::move(m);
  return true;
}

std::optional<uint64_t> Matcher::takers(uint32_t cp) const {
  if (stacks_.size() > 64) return std::nullopt;
  uint64_t bits = 0;
  for (size_t i = 0; i < stacks_.size(); ++i) {
    const Stack& s = stacks_[i];
    if (s.empty()) continue;
    const Pos p = s.back();
    if (g_->rules()[size_t(p.rule)].alternatives[size_t(p.alt)][size_t(p.index)].matches(cp)) bits |= uint64_t(1) << i;
  }
  return bits;
}

bool Matcher::accept_code_point(uint32_t cp) {
  return pending_.empty() && cp <= 0x10FFFF && !surrogate(cp) && step_code_point(cp);
}

bool Matcher::can_accept(std::string_view bytes) const {
  Matcher m = *this;
  return m.accept(bytes);
}

std::string Matcher::state_key() const {
  std::string k = pending_;
  k.push_back('\0');
  for (const Stack& s : stacks_) {
    for (const Pos& p : s) k.append(reinterpret_cast<const char*>(&p), sizeof(Pos));
    k.push_back('|');
  }
  return k;
}

bool Matcher::complete() const {
  return pending_.empty() && std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::finished() const {
  return pending_.empty() && std::all_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

}  // namespace eaglet::constrain
