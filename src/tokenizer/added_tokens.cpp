#include "tokenizer/added_tokens.h"

#include <algorithm>

namespace eaglet {

int AddedTokenMatcher::child(int node, unsigned char c) const {
  auto it = edges_.find((uint64_t(uint32_t(node)) << 8) | c);
  return it == edges_.end() ? -1 : it->second;
}

void AddedTokenMatcher::add(std::string_view content, int id, bool special) {
  if (content.empty() || id < 0) return;
  int node = 0;
  for (unsigned char c : content) {
    int next = child(node, c);
    if (next < 0) {
      next = int(nodes_.size());
      nodes_.emplace_back();
      edges_.emplace((uint64_t(uint32_t(node)) << 8) | c, next);
    }
    node = next;
  }
  nodes_[size_t(node)] = {id, special};
  starts_[static_cast<unsigned char>(content[0])] = true;
  max_length_ = std::max(max_length_, content.size());
}

AddedTokenMatcher::Match AddedTokenMatcher::longest_at(std::string_view text, size_t pos, bool parse_special) const {
  Match best;
  if (pos >= text.size() || !starts_[static_cast<unsigned char>(text[pos])]) return best;
  int node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    const Node& n = nodes_[size_t(node)];
    if (n.id >= 0 && (parse_special || !n.special)) best = {n.id, i + 1 - pos};
  }
  return best;
}

int AddedTokenMatcher::find(std::string_view content) const {
  int node = 0;
  for (unsigned char c : content) {
    node = child(node, c);
    if (node < 0) return -1;
  }
  return content.empty() ? -1 : nodes_[size_t(node)].id;
}

}  // namespace eaglet
