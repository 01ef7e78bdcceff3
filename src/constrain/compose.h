// Building one GBNF grammar out of several: renaming a grammar's rules so that it can sit beside
// others (a JSON schema's `value` and a regex's `value` must not meet), and free text that runs
// until one of a set of marker strings, where each marker either hands over to a continuation
// (a tool call's arguments after its trigger, the answer after `</think>`) or is forbidden.
//
// The free text is an Aho-Corasick automaton written as right-linear rules, one per proper prefix
// of a marker: a deterministic grammar (one live stack per state, whatever the text), so the text
// cannot contain a marker anywhere but where it hands over. Where two markers complete on the same
// character (one is a suffix of the other), the longer one decides.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace eaglet::constrain {

// `gbnf` with every rule name (definitions and references) prefixed by `prefix`: its start rule
// `root` becomes `<prefix>root`. Literals, classes, repetition bounds and comments stay as they are.
std::string prefix_rules(const std::string& gbnf, const std::string& prefix);

struct TextMarker {
  std::string text;                 // non-empty UTF-8
  std::optional<std::string> then;  // a GBNF sequence that follows the marker; none: forbidden
};

// Rules named `<name>` and `<name>-<k>` for UTF-8 text up to and including the first marker that
// completes, followed by that marker's `then`. `may_end`: the text may also stop anywhere before
// a marker (the end of the output). Errors name `where` (a marker that is empty or not UTF-8).
std::string free_text_gbnf(const std::string& name, const std::vector<TextMarker>& markers, bool may_end,
                           const std::string& where);

}  // namespace eaglet::constrain
