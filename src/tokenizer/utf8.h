// The two UTF-8 facts the tokenizer needs: how long a character is from its first byte, and where
// the last complete character of a byte string ends.
#pragma once
#include <cstddef>
#include <string_view>

namespace eaglet {

// Bytes in the character that starts with `c`; a stray continuation or invalid byte is a
// character of its own.
inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// Length of the longest prefix of `s` that ends on a UTF-8 character boundary.
inline size_t utf8_complete_prefix(std::string_view s) {
  // Walk back over at most 3 trailing bytes to find an unfinished lead byte.
  const size_t n = s.size();
  for (size_t back = 1; back <= (n < 4 ? n : 4); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = utf8_len(c);
    return need > back ? n - back : n;
  }
  return n;
}

}  // namespace eaglet
