// Lossless verification of a draft tree against the target's logits for the root and every node
// (row 0: the root, the sequence's last verified token; row 1 + i: node i).
//
// Greedy: walk down from the root while some child equals the target's argmax; the argmax where
// the walk stops is the next token. Sampling: multi-draft recursive rejection sampling (SpecInfer,
// EAGLE-2) with deterministic drafts, i.e. one-hot draft distributions: at each node the children
// are tried in order, child c accepted with probability r(c) / sum(r), where r starts as the
// target's distribution p and loses each rejected child's mass; when every child is rejected the
// next token is drawn from r. Each step emits token t with probability exactly p(t), for any
// temperature / top-k / top-p / min-p, so the output follows the target's distribution. For a
// chain this is vLLM's rejection sampler with a one-hot draft. Under a grammar (structured output)
// p at each node is the target's distribution masked by the grammar's state after the path to it
// (computed only for the nodes the walk reaches), so the output is plain constrained decoding's.
#pragma once
#include <vector>

#include "sampling/sampler.h"
#include "speculation/draft_tree.h"

namespace eaglet {

struct Verdict {
  std::vector<int> path;  // accepted nodes, root to leaf
  int next = -1;          // the target's token after them (correction or bonus)
  int accepted() const { return int(path.size()); }
};

Verdict verify_tree(const float* logits, int vocab, const DraftTree& tree, Sampler& sampler);

}  // namespace eaglet
