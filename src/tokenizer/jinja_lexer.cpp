#include "tokenizer/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"

namespace eaglet::jinja {

namespace {
// Where a tag closes: the first `close` outside string literals and brackets (Mistral's
// templates print "}}" from inside {{ }}; `{{ {'a': {'b': 1}} }}` closes two dicts first).
// Comments have neither.
size_t find_close(const std::string& src, size_t from, const std::string& close, bool code) {
  char quote = 0;
  int depth = 0;
  for (size_t i = from; i + 1 < src.size(); ++i) {
    const char c = src[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (code && (c == '\'' || c == '"')) {
      quote = c;
    } else if (code && (c == '(' || c == '[' || c == '{')) {
      ++depth;
    } else if (code && depth > 0 && (c == ')' || c == ']' || c == '}')) {
      --depth;
    } else if (src.compare(i, close.size(), close) == 0) {
      return i;
    }
  }
  return std::string::npos;
}
}  // namespace

std::vector<Tok> lex_expr(const std::string& s) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::Name, s.substr(i, j - i)});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool flt = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || (s[j] == '.' && !flt))) flt |= s[j++] == '.';
      out.push_back({flt ? Tok::Float : Tok::Int, s.substr(i, j - i)});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          const char e = s[++j];
          v += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          v += s[j];
        }
      }
      if (j >= s.size()) fail("chat template: unterminated string");
      out.push_back({Tok::Str, v});
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
      std::string op(1, c);
      for (auto t : two)
        if (s.compare(i, 2, t) == 0) op = t;
      out.push_back({Tok::Op, op});
      i += op.size();
    }
  }
  out.push_back({Tok::End, ""});
  if (out.size() > kMaxTokens) fail("chat template: an expression of {} tokens is over the {}-token limit", out.size(), kMaxTokens);
  return out;
}

// Splits the source into text, {{ }} and {% %} segments, applying whitespace control and
// Hugging Face's trim_blocks / lstrip_blocks.
std::vector<Segment> segment(const std::string& src) {
  std::vector<Segment> out;
  size_t i = 0;
  bool strip_next = false, after_block = false;
  while (i < src.size()) {
    size_t open = src.find('{', i);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    std::string text = src.substr(i, open == std::string::npos ? std::string::npos : open - i);
    if (after_block && !text.empty() && text[0] == '\n') text.erase(0, 1);  // trim_blocks
    if (strip_next) text = strip_chars(text, "", true, false);
    after_block = strip_next = false;
    if (open == std::string::npos || open + 1 >= src.size()) {
      out.push_back({Segment::Text, text});
      break;
    }
    const char kind = src[open + 1];
    const bool strip_before = open + 2 < src.size() && src[open + 2] == '-';
    if (strip_before) text = strip_chars(text, "", false, true);
    else if (kind == '%' || kind == '#') {
      // lstrip_blocks: drop the indentation before a block tag that starts its line (in the
      // source: after a newline or at the very start, never after another tag on the same line).
      const std::string raw = src.substr(i, open - i);
      const size_t nl = raw.find_last_of('\n');
      if (nl != std::string::npos || i == 0) {
        const size_t tail = raw.size() - (nl == std::string::npos ? 0 : nl + 1);
        if (raw.find_first_not_of(" \t", raw.size() - tail) == std::string::npos) text.erase(text.size() - std::min(tail, text.size()));
      }
    }
    out.push_back({Segment::Text, text});
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = find_close(src, open + 2, close, kind != '#');
    if (end == std::string::npos) fail("chat template: unclosed '{}{}'", '{', kind);
    size_t body_start = open + 2 + (strip_before ? 1 : 0), body_end = end;
    if (body_end > body_start && src[body_end - 1] == '-') {
      strip_next = true;
      --body_end;
    }
    const std::string body = src.substr(body_start, body_end - body_start);
    if (kind == '{') out.push_back({Segment::Output, body});
    else if (kind == '%') {
      out.push_back({Segment::Stmt, body});
      after_block = true;
    } else {
      after_block = true;
    }
    i = end + 2;
  }
  return out;
}

}  // namespace eaglet::jinja
