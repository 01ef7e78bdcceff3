#include "speculation/draft_tree.h"

#include <algorithm>

#include "core/error.h"

namespace eaglet {

void DraftTree::add(int token, int parent, float score) {
  EAGLET_CHECK(parent >= -1 && parent < size(), "draft tree: parent {} of node {} does not exist", parent, size());
  tokens.push_back(token);
  parents.push_back(parent);
  if (score >= 0) scores.push_back(score);
}

void DraftTree::truncate(int n) {
  if (n >= size()) return;
  tokens.resize(size_t(std::max(0, n)));
  parents.resize(tokens.size());
  if (!scores.empty()) scores.resize(tokens.size());
}

std::vector<int> DraftTree::depths() const {
  std::vector<int> d(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) d[i] = parents[i] < 0 ? 1 : d[size_t(parents[i])] + 1;
  return d;
}

DraftTree DraftTree::chain(const std::vector<int>& tokens) {
  DraftTree t;
  for (size_t i = 0; i < tokens.size(); ++i) t.add(tokens[i], int(i) - 1);
  return t;
}

}  // namespace eaglet
