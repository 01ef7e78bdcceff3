// Text helpers the tokenizer loaders and the encode pipeline share.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace eaglet {

inline const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's space

// Token ids may leave this many unused ids in total (some tokenizers skip a few); anything
// sparser is a broken or hostile file.
constexpr int64_t kMaxIdGap = 1 << 16;

// "<0xAB>" -> 0xAB (a byte-fallback token); -1 for anything else.
inline int parse_byte_token(const std::string& s) {
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  return int(std::strtol(s.substr(3, 2).c_str(), nullptr, 16));
}

// Builds a new string: replacing in place shifts the tail on every hit, which made a prompt of
// a few megabytes of spaces take minutes (quadratic).
inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t start = 0;
  for (size_t pos = s.find(from); pos != std::string_view::npos; pos = s.find(from, start)) {
    out.append(s, start, pos - start).append(to);
    start = pos + from.size();
  }
  return out.append(s, start);
}

}  // namespace eaglet
