// Grammars for structured output: llama.cpp's GBNF (the syntax llama-server's `grammar` field and
// vLLM's `structured_outputs.grammar` take), parsed into rules over Unicode code points, and a
// Matcher that follows a text through them byte by byte (UTF-8 sequences split across tokens
// included). Written from the published designs (llama.cpp's grammar docs and pushdown matcher,
// xgrammar's paper), not from their code.
//
// Syntax: `name ::= alternatives` (rule names [a-zA-Z0-9_-]+, the start rule `root`);
// alternatives separated by `|`; a sequence of "literals" (escapes \n \r \t \\ \" \xHH \uHHHH
// \UHHHHHHHH), [character classes] ([a-z], [^"\\], escapes as in literals), `.` (any code
// point), rule names and ( groups ), each optionally followed by *, +, ?, {m}, {m,}, {m,n};
// `#` starts a comment. Repetitions become rules of their own.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eaglet::constrain {

class Grammar {
 public:
  // One element of a sequence: a set of code points, or another rule.
  struct Element {
    enum class Kind { Chars, Rule } kind = Kind::Chars;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges (Chars)
    bool negated = false;                               // matches code points outside `ranges`
    int rule = -1;                                      // (Rule)
    bool matches(uint32_t cp) const;
  };
  using Sequence = std::vector<Element>;
  struct Rule {
    std::string name;
    std::vector<Sequence> alternatives;
  };

  // Parses GBNF `text`; an error names `where`, the line and column, and what is wrong (an
  // undefined rule, no `root`, left recursion, bad syntax). `start`: the start rule (a grammar
  // that wraps another, e.g. after the reasoning, starts at its own rule and refers to `root`).
  static std::shared_ptr<const Grammar> parse(const std::string& text, const std::string& where = "grammar",
                                              const std::string& start = "root");

  const std::vector<Rule>& rules() const { return rules_; }
  int root() const { return root_; }
  // Unique per parsed grammar in this process (mask caches key on it; addresses get reused).
  uint64_t id() const { return id_; }

 private:
  std::vector<Rule> rules_;
  int root_ = -1;
  uint64_t id_ = 0;
  friend class GrammarParser;
};

// A position in a grammar after some text: the set of pushdown stacks (llama.cpp's design) that
// the text so far leaves alive, plus the bytes of a code point not yet complete. Cheap to copy
// (forks for draft trees are copies).
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> g);
  // Advances over `bytes`; false (and the matcher unchanged) when no sentence of the grammar
  // continues the text so far with them.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would succeed, without advancing.
  bool can_accept(std::string_view bytes) const;
  // The text so far is a whole sentence of the grammar (end of generation is allowed here).
  bool complete() const;
  // No further byte is possible (complete() then says whether the text is a sentence).
  bool finished() const;
  const Grammar& grammar() const { return *g_; }
  // The state as bytes: equal keys accept the same continuations (mask caches key on it).
  std::string state_key() const;
  // Which live stacks can take code point `cp` next, one bit each: code points with equal bits
  // lead to equal states (token masks step once per class, not per character); 0: none can.
  // No value beyond 64 stacks. No bytes may be pending.
  std::optional<uint64_t> takers(uint32_t cp) const;
  // Whether a character that starts with the bytes `lead` (a proper, well-formed beginning of a
  // UTF-8 sequence) could come next. No bytes may be pending.
  bool could_complete(std::string_view lead) const;
  // Some bytes of a code point are pending (the text so far ends inside a character).
  bool mid_character() const { return !pending_.empty(); }
  // Advances over one whole code point (no bytes pending); false (unchanged) when refused.
  bool accept_code_point(uint32_t cp);

 private:
  struct Pos {
    int rule, alt, index;  // the next element of rules[rule].alternatives[alt] is `index`
    bool operator==(const Pos& o) const { return rule == o.rule && alt == o.alt && index == o.index; }
  };
  using Stack = std::vector<Pos>;  // back() is the element to match next; empty: done
  bool step_code_point(uint32_t cp);
  bool partial_viable() const;  // some stack's next element can start with the pending bytes
  static void expand(const Grammar& g, Stack s, std::vector<Stack>* out);

  std::shared_ptr<const Grammar> g_;
  std::vector<Stack> stacks_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
};

}  // namespace eaglet::constrain
