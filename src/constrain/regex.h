// Regular expressions (the ECMAScript/Python subset JSON schemas and vLLM's `regex` use) turned
// into GBNF for grammar.h, plus the small GBNF-writing helpers the JSON-schema converter shares.
//
// Supported: literals; escapes \d \w \s \D \W \S \n \r \t \f \v \0 \xHH \uHHHH and escaped
// punctuation; `.` (any character but a line terminator, as in ECMAScript); classes [a-z] [^...]
// with escapes inside; groups ( ), (?: ), (?<name> ); alternation |; quantifiers * + ? {m} {m,}
// {m,n} ({,n} as in Python), each optionally lazy (`*?`: the same set of full matches). The
// pattern must match the whole text: ^ at the start and $ at the end of a top-level alternative
// are accepted and change nothing. Refused with an error naming the position: backreferences,
// lookarounds, word boundaries and other anchors, inline flags, \p{...}, possessive quantifiers
// and unbounded repetition of something that can match the empty text (a top-down matcher
// would loop on it).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace eaglet::constrain {

// A GBNF grammar (start rule `root`) for exactly the strings `pattern` fully matches. Errors
// name `where` (e.g. "regex" or "$.properties.zip.pattern") and the offending offset.
std::string regex_to_gbnf(const std::string& pattern, const std::string& where);

// The same language as one GBNF expression with no rules of its own (to embed in a bigger
// grammar). json_content: the expression matches the regex over the *decoded* content of a JSON
// string, written between the quotes: `"` and `\` as \" \\ (or \/ for `/`), control characters
// as their short escapes or \u00XX; other characters are matched raw.
std::string regex_to_gbnf_expr(const std::string& pattern, const std::string& where, bool json_content);

namespace gbnf {

using CodeRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive code point ranges
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged ranges; the complement within [0, kMaxCodePoint].
CodeRanges normalize(CodeRanges r);
CodeRanges complement(const CodeRanges& r);
bool contains(const CodeRanges& r, uint32_t cp);

// The code points of UTF-8 text; invalid UTF-8 fails naming `where`.
std::vector<uint32_t> decode_utf8(std::string_view s, const std::string& where);
void append_utf8(std::string* out, uint32_t cp);

// A quoted GBNF literal for the UTF-8 text `s` ("" for the empty text).
std::string literal(std::string_view s, const std::string& where = "literal");
// A GBNF character class for a non-empty set ([...], [^...] when shorter, `.` for everything).
std::string char_class(const CodeRanges& set);
// One character of `set` as it may appear inside a JSON string (see regex_to_gbnf_expr).
// canonical: only the encoding nlohmann::json's dump writes (no \/, \u00xx only where there is
// no short escape, lowercase hex), so that each decoded text has exactly one encoding.
std::string json_chars(const CodeRanges& set, bool canonical = false);

}  // namespace gbnf
}  // namespace eaglet::constrain
