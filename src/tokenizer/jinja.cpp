#include "tokenizer/jinja.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_lexer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "core/error.h"

namespace eaglet::jinja {

// ---- expressions --------------------------------------------------------------------------

struct Scope {
  explicit Scope(Budget& b) : budget(b) {}
  Budget& budget;
  std::vector<Dict> frames;
  // Macros defined so far ({% macro %} registers itself when rendered, as Jinja defines it then).
  std::map<std::string, std::function<Value(Scope&, const std::vector<Value>&, const Kwargs&)>> macros;
  int call_depth = 0;  // macro calls in progress (a macro calling itself must end)
  void tick() { budget.step(); }
  // A copy of the variable (a string is copied whole: charged).
  Value get(const std::string& name) const {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return checked(budget, f->second);
    }
    return Value();
  }
};

struct Expr {
  virtual ~Expr() = default;
  virtual Value eval(Scope& s) const = 0;
};
using ExprP = std::unique_ptr<Expr>;

namespace {
struct Lit : Expr {
  Value v;
  explicit Lit(Value x) : v(std::move(x)) {}
  Value eval(Scope& s) const override { return checked(s.budget, v); }
};
struct Var : Expr {
  std::string name;
  explicit Var(std::string n) : name(std::move(n)) {}
  Value eval(Scope& s) const override {
    Value v = s.get(name);
    // Functions are defined names too (`strftime_now is defined` picks Llama 3.x's date line).
    if (v.is_undefined() && (is_builtin_function(name) || s.macros.count(name))) return Value("<function " + name + ">");
    return v;
  }
};
struct ListLit : Expr {
  std::vector<ExprP> items;
  Value eval(Scope& s) const override {
    auto l = std::make_shared<List>();
    for (auto& e : items) l->push_back(e->eval(s));
    return checked(s.budget, Value(l));
  }
};
struct DictLit : Expr {
  std::vector<std::pair<ExprP, ExprP>> items;
  Value eval(Scope& s) const override {
    auto d = std::make_shared<Dict>();
    for (auto& [k, v] : items) {
      s.budget.charge(kCompareCost * (d->size() + 1));  // an insert scans the ordered keys
      (*d)[k->eval(s).str()] = v->eval(s);
    }
    return Value(d);
  }
};

struct Attr : Expr {
  ExprP base;
  std::string name;
  Value eval(Scope& s) const override { return subscript(s.budget, base->eval(s), Value(name)); }
};
struct Index : Expr {
  ExprP base, key;
  Value eval(Scope& s) const override { return subscript(s.budget, base->eval(s), key->eval(s)); }
};
struct Slice : Expr {
  ExprP base, start, stop, step;
  Value eval(Scope& s) const override {
    Value b = base->eval(s);
    const int64_t st = step ? as_int(step->eval(s)) : 1;
    if (st == 0) fail("chat template: slice step cannot be zero");
    auto pick = [&](int64_t n, auto get) {
      int64_t lo = start ? as_int(start->eval(s)) : (st > 0 ? 0 : n - 1);
      int64_t hi = stop ? as_int(stop->eval(s)) : (st > 0 ? n : -n - 1);
      if (lo < 0) lo += n;
      if (hi < 0) hi += n;
      // Python's clamping, which also keeps a walk over huge bounds inside the sequence.
      lo = st > 0 ? std::clamp<int64_t>(lo, 0, n) : std::clamp<int64_t>(lo, -1, n - 1);
      hi = st > 0 ? std::clamp<int64_t>(hi, 0, n) : std::clamp<int64_t>(hi, -1, n - 1);
      for (int64_t i = lo; st > 0 ? i < hi : i > hi;) {
        if (i >= 0 && i < n) get(i);
        if (__builtin_add_overflow(i, st, &i)) break;
      }
    };
    if (auto l = std::get_if<std::shared_ptr<List>>(&b.v)) {
      auto out = std::make_shared<List>();
      pick(int64_t((*l)->size()), [&](int64_t i) { out->push_back(checked(s.budget, (**l)[size_t(i)])); });
      return Value(out);
    }
    if (auto str = std::get_if<std::string>(&b.v)) {
      std::string out;
      s.budget.charge(str->size());
      pick(int64_t(str->size()), [&](int64_t i) { out += (*str)[size_t(i)]; });
      return Value(out);
    }
    return Value();
  }
};

struct Call : Expr {
  ExprP callee;  // Attr (method) or Var (function)
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  Value eval(Scope& s) const override {
    std::vector<Value> a;
    for (auto& e : args) a.push_back(e->eval(s));
    if (auto* m = dynamic_cast<const Attr*>(callee.get())) return checked(s.budget, call_method(s.budget, m->base->eval(s), m->name, a));
    Kwargs kw;
    for (auto& [k, e] : kwargs) kw.emplace_back(k, e->eval(s));
    const auto* var = dynamic_cast<const Var*>(callee.get());
    if (var)
      if (auto m = s.macros.find(var->name); m != s.macros.end()) return checked(s.budget, m->second(s, a, kw));
    return checked(s.budget, call_function(s.budget, var ? var->name : "", a, kw));
  }
};
struct Unary : Expr {
  std::string op;
  ExprP e;
  Value eval(Scope& s) const override {
    Value v = e->eval(s);
    if (op == "not") return Value(!v.truthy());
    if (std::holds_alternative<double>(v.v)) return Value(-std::get<double>(v.v));
    return Value(checked_arith('-', 0, as_int(v)));
  }
};

// `x ~ y` and string `+`, checked against kMaxBytes before the bytes are built.
Value concatenated(Budget& b, const std::string& x, const std::string& y) {
  Budget::fits(x.size() + y.size(), "a concatenated string");
  b.charge(x.size() + y.size());
  return Value(x + y);
}

// 'ab' * n: nothing to build for an empty string or n <= 0 ('' * 9e18 looped 9e18 times).
Value repeated(Budget& b, const std::string& s, int64_t n) {
  if (s.empty() || n <= 0) return Value(std::string());
  if (uint64_t(n) > kMaxBytes / s.size()) fail("chat template: repeated string over the {}-byte limit", kMaxBytes);
  b.charge(s.size() * size_t(n));
  std::string o;
  o.reserve(s.size() * size_t(n));
  for (int64_t i = 0; i < n; ++i) o += s;
  return Value(o);
}

struct Binary : Expr {
  std::string op;
  ExprP l, r;
  Value eval(Scope& s) const override {
    if (op == "and") {
      Value a = l->eval(s);
      return a.truthy() ? r->eval(s) : a;
    }
    if (op == "or") {
      Value a = l->eval(s);
      return a.truthy() ? a : r->eval(s);
    }
    Value a = l->eval(s), b = r->eval(s);
    Budget& budget = s.budget;
    if (op == "~") return concatenated(budget, a.str(), b.str());
    if (op == "==") return Value(equal(budget, a, b));
    if (op == "!=") return Value(!equal(budget, a, b));
    if (op == "in" || op == "not in") {
      const bool found = contains(budget, b, a);
      return Value(op == "in" ? found : !found);
    }
    if (op == "+") {
      if (std::holds_alternative<std::string>(a.v) || std::holds_alternative<std::string>(b.v)) {
        if (!std::holds_alternative<std::string>(a.v) || !std::holds_alternative<std::string>(b.v))
          fail("chat template: cannot add '{}' and '{}'", a.str(), b.str());
        return concatenated(budget, std::get<std::string>(a.v), std::get<std::string>(b.v));
      }
      if (auto la = std::get_if<std::shared_ptr<List>>(&a.v)) {
        auto lb = std::get_if<std::shared_ptr<List>>(&b.v);
        if (!lb) fail("chat template: cannot add a list and '{}'", b.str());
        if (int64_t((*la)->size() + (*lb)->size()) > kMaxItems) fail("chat template: list over the {}-item limit", kMaxItems);
        auto out = std::make_shared<List>(**la);
        out->insert(out->end(), (*lb)->begin(), (*lb)->end());
        for (auto& x : *out) budget.charge(copy_cost(x));
        return Value(out);
      }
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") budget.charge(copy_cost(a) + copy_cost(b));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (std::holds_alternative<std::string>(a.v)) c = a.str().compare(b.str());
      else c = as_double(a) < as_double(b) ? -1 : as_double(a) > as_double(b) ? 1 : 0;
      return Value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    const bool flt = std::holds_alternative<double>(a.v) || std::holds_alternative<double>(b.v) || op == "/";
    if (flt) {
      const double x = as_double(a), y = as_double(b);
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "/") return Value(x / y);
      if (op == "%") {  // Python: the result takes the divisor's sign
        const double r = std::fmod(x, y);
        return Value(r != 0 && (r < 0) != (y < 0) ? r + y : r);
      }
      if (op == "//") return Value(std::floor(x / y));
    }
    if (op == "*")
      if (auto str = std::get_if<std::string>(&a.v)) return repeated(budget, *str, as_int(b));  // 'ab' * 3
    const int64_t x = as_int(a), y = as_int(b);
    if (op == "+" || op == "-" || op == "*") return Value(checked_arith(op[0], x, y));
    if (y == 0) fail("chat template: division by zero");
    if (y == -1 && x == INT64_MIN) fail("chat template: integer overflow in {} {} {}", x, op, y);
    const int64_t q = x / y, r = x % y;  // C truncates; Python floors
    const bool adjust = r != 0 && (r < 0) != (y < 0);
    if (op == "%") return Value(adjust ? r + y : r);
    if (op == "//") return Value(adjust ? q - 1 : q);
    fail("chat template: unknown operator '{}'", op);
  }
};

struct Conditional : Expr {
  ExprP cond, yes, no;
  Value eval(Scope& s) const override { return cond->eval(s).truthy() ? yes->eval(s) : (no ? no->eval(s) : Value()); }
};

struct Filter : Expr {
  ExprP base;
  std::string name;
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  Value eval(Scope& s) const override {
    std::vector<Value> a;
    for (auto& e : args) a.push_back(e->eval(s));
    Kwargs kw;
    for (auto& [k, e] : kwargs) kw.emplace_back(k, e->eval(s));
    return checked(s.budget, apply_filter(s.budget, name, base->eval(s), a, kw));
  }
};
struct Test : Expr {
  ExprP base;
  std::string name;
  std::vector<ExprP> args;
  bool negate = false;
  Value eval(Scope& s) const override {
    std::vector<Value> a;
    for (auto& e : args) a.push_back(e->eval(s));
    const bool r = apply_test(s.budget, name, base->eval(s), a);
    return Value(negate ? !r : r);
  }
};
// Counts parser recursion (parentheses, unary operators, nested blocks): deep enough nesting
// would overflow the stack while parsing, rendering or freeing the tree.
struct Nest {
  int& depth;
  explicit Nest(int& d) : depth(d) {
    if (++depth > kMaxNesting) fail("chat template: nesting deeper than {} levels", kMaxNesting);
  }
  ~Nest() { --depth; }
};

class Parser {
 public:
  explicit Parser(const std::string& src) : t_(lex_expr(src)) {}
  ExprP parse() {
    ExprP e = expr();
    if (peek().kind != Tok::End) fail("chat template: unexpected '{}'", peek().text);
    return e;
  }
  const Tok& peek(size_t o = 0) const { return t_[std::min(p_ + o, t_.size() - 1)]; }
  bool is(const char* s, size_t o = 0) const { return (peek(o).kind == Tok::Op || peek(o).kind == Tok::Name) && peek(o).text == s; }
  bool accept(const char* s) {
    if (!is(s)) return false;
    ++p_;
    return true;
  }
  void expect(const char* s) {
    if (!accept(s)) fail("chat template: expected '{}' but found '{}'", s, peek().text);
  }
  std::string name() {
    if (peek().kind != Tok::Name) fail("chat template: expected a name, found '{}'", peek().text);
    return t_[p_++].text;
  }
  bool done() const { return peek().kind == Tok::End; }

  ExprP expr() {
    Nest nest(depth_);
    ExprP e = or_expr();
    if (is("if")) {
      ++p_;
      auto c = std::make_unique<Conditional>();
      c->yes = std::move(e);
      c->cond = or_expr();
      if (accept("else")) c->no = expr();
      return c;
    }
    return e;
  }

 private:
  ExprP bin(ExprP l, const std::string& op, ExprP r) {
    auto b = std::make_unique<Binary>();
    b->op = op;
    b->l = std::move(l);
    b->r = std::move(r);
    return b;
  }
  ExprP or_expr() {
    ExprP e = and_expr();
    while (accept("or")) e = bin(std::move(e), "or", and_expr());
    return e;
  }
  ExprP and_expr() {
    ExprP e = not_expr();
    while (accept("and")) e = bin(std::move(e), "and", not_expr());
    return e;
  }
  ExprP not_expr() {
    Nest nest(depth_);
    if (accept("not")) {
      auto u = std::make_unique<Unary>();
      u->op = "not";
      u->e = not_expr();
      return u;
    }
    return compare();
  }
  ExprP compare() {
    ExprP e = concat();
    for (;;) {
      if (is("not") && is("in", 1)) {
        p_ += 2;
        e = bin(std::move(e), "not in", concat());
        continue;
      }
      bool matched = false;
      for (const char* op : {"==", "!=", "<=", ">=", "<", ">", "in"})
        if (accept(op)) {
          e = bin(std::move(e), op, concat());
          matched = true;
          break;
        }
      if (!matched) return e;
    }
  }
  ExprP concat() {
    ExprP e = math1();
    while (accept("~")) e = bin(std::move(e), "~", math1());
    return e;
  }
  ExprP math1() {
    ExprP e = math2();
    while (is("+") || is("-")) {
      const std::string op = t_[p_++].text;
      e = bin(std::move(e), op, math2());
    }
    return e;
  }
  ExprP math2() {
    ExprP e = unary();
    while (is("*") || is("/") || is("//") || is("%")) {
      const std::string op = t_[p_++].text;
      e = bin(std::move(e), op, unary());
    }
    return e;
  }
  ExprP unary() {
    Nest nest(depth_);
    if (accept("-")) {
      auto u = std::make_unique<Unary>();
      u->op = "-";
      u->e = unary();
      return u;
    }
    ExprP e = postfix();
    while (accept("|")) {
      auto f = std::make_unique<Filter>();
      f->base = std::move(e);
      f->name = name();
      if (accept("(")) arguments(&f->args, &f->kwargs);
      e = std::move(f);
    }
    if (accept("is")) {
      auto t = std::make_unique<Test>();
      t->base = std::move(e);
      t->negate = accept("not");
      t->name = name();
      // `is divisibleby(3)`, or Jinja's bare argument (`is sameas false`, `is in ['a']`): what
      // can start a primary, except the words that continue the expression instead.
      if (accept("(")) arguments(&t->args, nullptr);
      else if (peek().kind == Tok::Str || peek().kind == Tok::Int || peek().kind == Tok::Float || is("[") || is("{") ||
               (peek().kind == Tok::Name && !is("else") && !is("or") && !is("and")))
        t->args.push_back(primary());
      e = std::move(t);
    }
    return e;
  }
  ExprP postfix() {
    ExprP e = primary();
    for (;;) {
      if (accept(".")) {
        auto a = std::make_unique<Attr>();
        a->base = std::move(e);
        a->name = name();
        e = std::move(a);
      } else if (accept("[")) {
        ExprP start, stop, step;
        if (!is(":")) start = expr();
        if (accept(":")) {
          if (!is(":") && !is("]")) stop = expr();
          if (accept(":") && !is("]")) step = expr();
          expect("]");
          auto sl = std::make_unique<Slice>();
          sl->base = std::move(e);
          sl->start = std::move(start);
          sl->stop = std::move(stop);
          sl->step = std::move(step);
          e = std::move(sl);
        } else {
          expect("]");
          auto ix = std::make_unique<Index>();
          ix->base = std::move(e);
          ix->key = std::move(start);
          e = std::move(ix);
        }
      } else if (accept("(")) {
        auto c = std::make_unique<Call>();
        c->callee = std::move(e);
        arguments(&c->args, &c->kwargs);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  // After "(": positional and name=value arguments up to ")" (kwargs null: positional only).
  void arguments(std::vector<ExprP>* args, std::vector<std::pair<std::string, ExprP>>* kwargs) {
    while (!accept(")")) {
      if (kwargs && peek().kind == Tok::Name && is("=", 1)) {
        std::string k = name();
        expect("=");
        kwargs->emplace_back(k, expr());
      } else {
        args->push_back(expr());
      }
      if (!is(")")) expect(",");
    }
  }
  ExprP primary() {
    const Tok& t = peek();
    if (t.kind == Tok::Str) {
      ++p_;
      std::string s = t.text;
      while (peek().kind == Tok::Str) s += t_[p_++].text;  // adjacent literals concatenate
      return std::make_unique<Lit>(Value(s));
    }
    if (t.kind == Tok::Int || t.kind == Tok::Float) {
      ++p_;
      errno = 0;
      const int64_t i = t.kind == Tok::Int ? std::strtoll(t.text.c_str(), nullptr, 10) : 0;
      const double d = t.kind == Tok::Float ? std::strtod(t.text.c_str(), nullptr) : 0;
      if (errno == ERANGE) fail("chat template: number {} is out of range", t.text);
      return std::make_unique<Lit>(t.kind == Tok::Int ? Value(i) : Value(d));
    }
    if (accept("(")) {
      ExprP e = expr();
      expect(")");
      return e;
    }
    if (accept("[")) {
      auto l = std::make_unique<ListLit>();
      while (!accept("]")) {
        l->items.push_back(expr());
        accept(",");
      }
      return l;
    }
    if (accept("{")) {
      auto d = std::make_unique<DictLit>();
      while (!accept("}")) {
        ExprP k = expr();
        expect(":");
        d->items.emplace_back(std::move(k), expr());
        accept(",");
      }
      return d;
    }
    if (t.kind == Tok::Name) {
      ++p_;
      if (t.text == "true" || t.text == "True") return std::make_unique<Lit>(Value(true));
      if (t.text == "false" || t.text == "False") return std::make_unique<Lit>(Value(false));
      if (t.text == "none" || t.text == "None") return std::make_unique<Lit>(Value(nullptr));
      return std::make_unique<Var>(t.text);
    }
    fail("chat template: unexpected '{}'", t.text);
  }

  std::vector<Tok> t_;
  size_t p_ = 0;
  int depth_ = 0;
};
}  // namespace

// ---- statements ---------------------------------------------------------------------------

struct Node {
  virtual ~Node() = default;
  virtual void render(Scope& s, std::string& out) const = 0;
};

namespace {
using Body = std::vector<std::unique_ptr<Node>>;
void render_body(const Body& b, Scope& s, std::string& out) {
  for (auto& n : b) {
    s.tick();
    n->render(s, out);
    if (out.size() > kMaxBytes) fail("chat template: output over the {}-byte limit", kMaxBytes);
  }
}

struct TextNode : Node {
  std::string text;
  void render(Scope&, std::string& out) const override { out += text; }
};
struct OutputNode : Node {
  ExprP e;
  void render(Scope& s, std::string& out) const override {
    const std::string text = e->eval(s).str();
    Budget::fits(out.size() + text.size(), "the output");
    s.budget.charge(text.size());
    out += text;
  }
};
struct IfNode : Node {
  std::vector<std::pair<ExprP, Body>> branches;  // null condition = else
  void render(Scope& s, std::string& out) const override {
    for (auto& [c, b] : branches)
      if (!c || c->eval(s).truthy()) {
        render_body(b, s, out);
        return;
      }
  }
};
struct SetNode : Node {
  std::string target, attr;  // attr set: `set ns.attr = ...`
  ExprP e;
  void render(Scope& s, std::string&) const override {
    Value v = e->eval(s);
    if (attr.empty()) {
      s.frames.back()[target] = std::move(v);
      return;
    }
    Value obj = s.get(target);
    auto d = std::get_if<std::shared_ptr<Dict>>(&obj.v);
    if (!d) fail("chat template: cannot set attribute '{}' on '{}'", attr, target);
    // A namespace holding itself would be a reference cycle: leaked, and endless to print.
    if (reaches(v, d->get())) fail("chat template: '{}.{}' cannot hold '{}' itself", target, attr, target);
    (**d)[attr] = v;
  }
};
struct ForNode : Node {
  std::vector<std::string> vars;
  ExprP iter;
  ExprP filter;
  Body body, else_body;
  void render(Scope& s, std::string& out) const override {
    Value it = iter->eval(s);
    List items;
    if (auto l = std::get_if<std::shared_ptr<List>>(&it.v)) items = **l;
    else if (auto d = std::get_if<std::shared_ptr<Dict>>(&it.v))
      for (auto& [k, v] : **d) items.push_back(Value(k));
    else if (auto str = std::get_if<std::string>(&it.v))
      for (char c : *str) items.push_back(Value(std::string(1, c)));
    for (auto& x : items) s.budget.charge(copy_cost(x));
    if (filter) {
      List kept;
      for (auto& x : items) {
        s.frames.push_back({});
        s.frames.back()[vars[0]] = x;
        if (filter->eval(s).truthy()) kept.push_back(x);
        s.frames.pop_back();
      }
      items.swap(kept);
    }
    if (items.empty()) {
      render_body(else_body, s, out);
      return;
    }
    const int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      s.tick();
      s.frames.push_back({});
      auto loop = std::make_shared<Dict>();
      (*loop)["index0"] = Value(i);
      (*loop)["index"] = Value(i + 1);
      (*loop)["revindex"] = Value(n - i);
      (*loop)["revindex0"] = Value(n - i - 1);
      (*loop)["first"] = Value(i == 0);
      (*loop)["last"] = Value(i == n - 1);
      (*loop)["length"] = Value(n);
      s.frames.back()["loop"] = Value(loop);
      const Value& x = items[size_t(i)];
      if (vars.size() == 1) {
        s.frames.back()[vars[0]] = x;
      } else {
        auto l = std::get_if<std::shared_ptr<List>>(&x.v);
        for (size_t v = 0; v < vars.size(); ++v) s.frames.back()[vars[v]] = l && v < (*l)->size() ? (**l)[v] : Value();
      }
      render_body(body, s, out);
      s.frames.pop_back();
    }
  }
};

// {% macro name(a, b=default) %}...{% endmacro %}: rendering the definition registers it; a call
// renders the body in a frame holding the arguments and returns the text.
struct MacroNode : Node {
  std::string name;
  std::vector<std::pair<std::string, ExprP>> params;  // default null: required
  Body body;
  void render(Scope& s, std::string&) const override {
    s.macros[name] = [this](Scope& sc, const std::vector<Value>& args, const Kwargs& kwargs) {
      if (args.size() > params.size()) fail("chat template: macro '{}' takes {} arguments, got {}", name, params.size(), args.size());
      Dict frame;
      for (size_t i = 0; i < params.size(); ++i) {
        const std::string& p = params[i].first;  // not a structured binding: clang 14 cannot capture one
        const ExprP& def = params[i].second;
        auto kw = std::find_if(kwargs.begin(), kwargs.end(), [&](auto& kv) { return kv.first == p; });
        frame[p] = i < args.size() ? args[i] : kw != kwargs.end() ? kw->second : def ? def->eval(sc) : Value();
      }
      Nest nest(sc.call_depth);
      sc.frames.push_back(std::move(frame));
      std::string out;
      render_body(body, sc, out);
      sc.frames.pop_back();
      return Value(out);
    };
  }
};

class StatementParser {
 public:
  explicit StatementParser(std::vector<Segment> segs) : s_(std::move(segs)) {}
  Body parse_all() {
    Body b = parse_until({});
    if (pos_ < s_.size()) fail("chat template: unexpected '{{% {} %}}'", s_[pos_].text);
    return b;
  }

 private:
  static std::string keyword(const std::string& stmt) {
    Parser p(stmt);
    return p.peek().kind == Tok::Name ? p.peek().text : "";
  }
  Body parse_until(const std::vector<std::string>& ends) {
    Nest nest(depth_);
    Body body;
    while (pos_ < s_.size()) {
      const Segment& seg = s_[pos_];
      if (seg.kind == Segment::Text) {
        if (!seg.text.empty()) {
          auto t = std::make_unique<TextNode>();
          t->text = seg.text;
          body.push_back(std::move(t));
        }
        ++pos_;
        continue;
      }
      if (seg.kind == Segment::Output) {
        auto o = std::make_unique<OutputNode>();
        o->e = Parser(seg.text).parse();
        body.push_back(std::move(o));
        ++pos_;
        continue;
      }
      const std::string kw = keyword(seg.text);
      if (std::find(ends.begin(), ends.end(), kw) != ends.end()) return body;
      ++pos_;
      Parser p(seg.text);
      p.name();
      body.push_back(parse_statement(kw, p));
    }
    if (!ends.empty()) fail("chat template: missing '{}'", ends.back());
    return body;
  }

  // A {% %} statement's node (its keyword already read by `p`), with the body up to its end tag.
  std::unique_ptr<Node> parse_statement(const std::string& kw, Parser& p) {
    if (kw == "if") return parse_if(p);
    if (kw == "for") return parse_for(p);
    if (kw == "macro") return parse_macro(p);
    if (kw == "set") {
      auto n = std::make_unique<SetNode>();
      n->target = p.name();
      if (p.accept(".")) n->attr = p.name();
      p.expect("=");
      n->e = p.expr();
      return n;
    }
    fail("chat template: unsupported statement '{}'", kw);
  }
  std::unique_ptr<Node> parse_if(Parser& p) {
    auto n = std::make_unique<IfNode>();
    ExprP cond = p.expr();
    for (;;) {
      Body b = parse_until({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(b));
      if (pos_ >= s_.size()) fail("chat template: missing endif");
      Parser q(s_[pos_++].text);
      const std::string k = q.name();
      if (k == "endif") break;
      if (k == "elif") cond = q.expr();
      else {
        n->branches.emplace_back(nullptr, parse_until({"endif"}));
        if (pos_ >= s_.size()) fail("chat template: missing endif");
        ++pos_;
        break;
      }
    }
    return n;
  }
  std::unique_ptr<Node> parse_for(Parser& p) {
    auto n = std::make_unique<ForNode>();
    n->vars.push_back(p.name());
    while (p.accept(",")) n->vars.push_back(p.name());
    p.expect("in");
    n->iter = p.expr();
    if (p.accept("if")) n->filter = p.expr();
    n->body = parse_until({"else", "endfor"});
    if (pos_ >= s_.size()) fail("chat template: missing endfor");
    if (keyword(s_[pos_++].text) == "else") {
      n->else_body = parse_until({"endfor"});
      if (pos_ >= s_.size()) fail("chat template: missing endfor");
      ++pos_;
    }
    return n;
  }
  std::unique_ptr<Node> parse_macro(Parser& p) {
    auto n = std::make_unique<MacroNode>();
    n->name = p.name();
    p.expect("(");
    while (!p.accept(")")) {
      std::string param = p.name();
      n->params.emplace_back(param, p.accept("=") ? p.expr() : nullptr);
      if (!p.is(")")) p.expect(",");
    }
    n->body = parse_until({"endmacro"});
    if (pos_ >= s_.size()) fail("chat template: missing endmacro");
    ++pos_;
    return n;
  }

  std::vector<Segment> s_;
  size_t pos_ = 0;
  int depth_ = 0;
};
}  // namespace

Template::Template(const std::string& source) : body_(StatementParser(segment(source)).parse_all()) {}
Template::~Template() = default;

std::string Template::render(const Dict& globals, const RenderLimits& limits) const {
  Budget budget(limits);
  Scope s(budget);
  s.frames.push_back(globals);
  s.frames.push_back({});
  std::string out;
  render_body(body_, s, out);
  return out;
}

}  // namespace eaglet::jinja
