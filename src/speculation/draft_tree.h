// What a proposer hands the engine for one sequence: a token tree whose root is the sequence's
// last verified token (not stored). A chain is the tree with one child per node.
//
// Nodes are ordered by score, highest first, and a node's score never exceeds its parent's, so
// every prefix of the node list is itself a tree: the draft policy trims a tree to any budget by
// truncating it.
#pragma once
#include <vector>

namespace eaglet {

// The shape a proposer is asked for: `topk` children per expanded node, `depth` levels, at most
// `budget` nodes kept. A chain of k is {1, k, k}.
struct TreeShape {
  int topk = 1, depth = 0, budget = 0;
  static TreeShape chain(int k) { return {1, k, k}; }
  bool is_chain() const { return topk <= 1; }
  bool empty() const { return depth <= 0 || budget <= 0; }
};

struct DraftTree {
  std::vector<int> tokens;    // target-vocabulary ids
  std::vector<int> parents;   // index of the parent node; -1 = child of the root
  std::vector<float> scores;  // draft probability of the path root..node; empty if the proposer has none

  int size() const { return int(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  void add(int token, int parent, float score = -1.0f);
  void truncate(int n);  // keeps the first n nodes (still a tree)
  // Depth of each node (children of the root have depth 1).
  std::vector<int> depths() const;
  static DraftTree chain(const std::vector<int>& tokens);
};

}  // namespace eaglet
