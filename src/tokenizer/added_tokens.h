// Added tokens (special tokens such as <|im_start|>, and non-special ones such as GPT-NeoX's runs
// of spaces) are matched in the raw text before pre-tokenization, longest first. A trie makes
// that linear in the text: each position costs at most one walk as long as the longest token,
// where trying every added token at every byte was quadratic in practice (thousands of added
// tokens times a megabyte prompt).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace eaglet {

class AddedTokenMatcher {
 public:
  // A later token with the same content replaces the earlier one.
  void add(std::string_view content, int id, bool special);

  struct Match {
    int id = -1;
    size_t length = 0;
  };
  // The longest token starting at text[pos]; special tokens only when `parse_special`.
  // Match::id is -1 when none starts there.
  Match longest_at(std::string_view text, size_t pos, bool parse_special) const;
  // The id of a token with exactly this content, or -1.
  int find(std::string_view content) const;
  size_t max_length() const { return max_length_; }

 private:
  struct Node {
    int id = -1;
    bool special = false;
  };
  int child(int node, unsigned char c) const;
  std::vector<Node> nodes_{Node{}};
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8) | byte -> child node
  std::array<bool, 256> starts_{};               // bytes some token starts with (fast rejection)
  size_t max_length_ = 0;
};

}  // namespace eaglet
