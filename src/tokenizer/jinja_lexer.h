// The lexical layer of the Jinja subset (jinja.h): expression tokens, and the split of a
// template into text, {{ }} and {% %} segments with whitespace control.
#pragma once
#include <string>
#include <vector>

namespace eaglet::jinja {

struct Tok {
  enum Kind { Name, Str, Int, Float, Op, End } kind;
  std::string text;
};
// The tokens of one {{ }} or {% %} body, ending with an End token.
std::vector<Tok> lex_expr(const std::string& s);

struct Segment {
  enum Kind { Text, Output, Stmt } kind;
  std::string text;
};
// Splits the source into text, {{ }} and {% %} segments (comments dropped), applying `-`
// whitespace control and Hugging Face's trim_blocks / lstrip_blocks.
std::vector<Segment> segment(const std::string& src);

}  // namespace eaglet::jinja
