// Regex pre-tokenization with PCRE2 (Unicode classes \p{L}, \p{N}, lookahead) in the "Isolated"
// behaviour of HF tokenizers: every match and every gap between matches becomes a piece.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace eaglet {

class RegexSplitter {
 public:
  explicit RegexSplitter(const std::string& pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The GPT-2 pattern ByteLevel uses when `use_regex` is true.
extern const char* kGpt2SplitPattern;

}  // namespace eaglet
