#include "server/reasoning.h"

#include <fmt/format.h>

#include "constrain/compose.h"
#include "constrain/regex.h"
#include "core/error.h"

namespace eaglet {

namespace {
const std::vector<ReasoningFormat>& formats() {
  static const std::vector<ReasoningFormat> f = {
      {"deepseek_r1", "<think>", "</think>", true},
      {"qwen3", "<think>", "</think>", false},
      {"minimax_m2", "<think>", "</think>", true},
      {"minimax_m3", "<mm:think>", "</mm:think>", false},
  };
  return f;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool proper_prefix_of(std::string_view s, std::string_view marker) { return s.size() < marker.size() && starts_with(marker, s); }
}  // namespace

const std::vector<std::string>& reasoning_parser_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (auto& f : formats()) n.push_back(f.name);
    return n;
  }();
  return names;
}

const ReasoningFormat& reasoning_format(const std::string& name) {
  for (auto& f : formats())
    if (f.name == name) return f;
  fail("--reasoning-parser '{}' is not one of: {}", name, fmt::join(reasoning_parser_names(), ", "));
}

ReasoningStart reasoning_start(const ReasoningFormat& f, std::string_view prompt) {
  while (!prompt.empty() && std::isspace(static_cast<unsigned char>(prompt.back()))) prompt.remove_suffix(1);
  auto ends_with = [&](const std::string& m) { return prompt.size() >= m.size() && prompt.substr(prompt.size() - m.size()) == m; };
  if (ends_with(f.start)) return ReasoningStart::Inside;
  if (ends_with(f.end)) return ReasoningStart::Outside;
  return ReasoningStart::Open;
}

ReasoningSplitter::ReasoningSplitter(const ReasoningFormat& f, ReasoningStart s)
    : f_(f), state_(s == ReasoningStart::Inside ? State::Reasoning : s == ReasoningStart::Outside ? State::Answer : State::Open) {}

std::string ReasoningSplitter::feed(std::string_view text, OutputDelta* out) {
  buf_ += text;
  for (;;) {
    switch (state_) {
      case State::Open:  // the first characters say whether the model thinks
        if (proper_prefix_of(buf_, f_.start) || proper_prefix_of(buf_, f_.end)) return "";
        if (starts_with(buf_, f_.start)) {
          buf_.erase(0, f_.start.size());
          state_ = State::Reasoning;
        } else if (starts_with(buf_, f_.end)) {
          buf_.erase(0, f_.end.size());
          state_ = State::AfterEnd;
        } else {
          state_ = f_.implicit_start ? State::Reasoning : State::Answer;
        }
        break;
      case State::Reasoning: {
        const size_t at = buf_.find(f_.end);
        if (at == std::string::npos) {
          const size_t keep = marker_prefix_at_end(buf_, f_.end);
          out->reasoning.append(buf_, 0, buf_.size() - keep);
          buf_.erase(0, buf_.size() - keep);
          return "";
        }
        out->reasoning.append(buf_, 0, at);
        buf_.erase(0, at + f_.end.size());
        state_ = State::AfterEnd;
        break;
      }
      case State::AfterEnd: {  // the answer starts at its first visible character
        const size_t first = buf_.find_first_not_of(" \t\r\n");
        if (first == std::string::npos) {
          buf_.clear();
          return "";
        }
        buf_.erase(0, first);
        state_ = State::Answer;
        break;
      }
      case State::Answer: {
        std::string answer;
        answer.swap(buf_);
        return answer;
      }
    }
  }
}

std::string ReasoningSplitter::finish(OutputDelta* out) {
  std::string rest;
  rest.swap(buf_);
  if (state_ == State::Reasoning) {
    out->reasoning += rest;
    return "";
  }
  return state_ == State::AfterEnd ? "" : rest;
}

std::string after_reasoning_gbnf(const std::string& gbnf, const ReasoningFormat& f, ReasoningStart s, const std::string& start_rule) {
  if (s == ReasoningStart::Outside) return gbnf;
  // Free text up to the first end marker, which goes on to the answer.
  const std::string p = start_rule + "-";
  std::string out = gbnf + "\n" + constrain::free_text_gbnf(p + "think", {{f.end, p + "answer"}}, false, f.name + " end marker");
  out += fmt::format("{}answer ::= [ \\t\\r\\n]{{0,20}} root\n", p);
  if (s == ReasoningStart::Inside || f.implicit_start) out += fmt::format("{} ::= {}think\n", start_rule, p);
  else out += fmt::format("{} ::= {} {}think | {} {}answer | root\n", start_rule, constrain::gbnf::literal(f.start), p,
                       constrain::gbnf::literal(f.end), p);
  return out;
}

}  // namespace eaglet
