#include "speculation/tree_verifier.h"

#include <cmath>
#include <optional>

namespace eaglet {

Verdict verify_tree(const float* logits, int vocab, const DraftTree& tree, Sampler& sampler) {
  const SamplingParams& sp = sampler.params();
  // Children of each node in node order (index 0 holds the root's: node ids shifted by one).
  std::vector<std::vector<int>> children(size_t(tree.size()) + 1);
  for (int i = 0; i < tree.size(); ++i) children[size_t(tree.parents[size_t(i)] + 1)].push_back(i);
  Verdict v;
  std::vector<float> r;
  // Constrained: the grammar's state along the path; each row is the target's distribution with
  // what the grammar refuses there masked out, the distribution plain constrained decoding samples.
  std::optional<constrain::Matcher> at;
  if (sampler.matcher()) at = *sampler.matcher();
  int node = -1;
  for (;;) {
    const float* raw = logits + size_t(node + 1) * size_t(vocab);
    const float* row = raw;
    const auto& kids = children[size_t(node + 1)];
    int chosen = -1;
    // No children: the target's own draw, through the sampler (and its penalties, which only
    // sequences without drafts have: EngineCore never drafts for them).
    if (kids.empty()) { v.next = sampler.sample(raw, vocab, at ? &*at : nullptr); return v; }
    if (at) {
      row = sampler.masked(raw, vocab, *at);
      for (int c : kids)
        if (std::isinf(row[size_t(tree.tokens[size_t(c)])])) sampler.count_refused_draft();
    }
    if (sp.greedy()) {
      const int t = argmax(row, vocab);
      for (int c : kids)
        if (tree.tokens[size_t(c)] == t) { chosen = c; break; }
      if (chosen < 0) { v.next = t; return v; }
    } else {
      target_probs(row, vocab, sp, &r);
      double mass = 1.0;
      for (int c : kids) {
        float& rc = r[size_t(tree.tokens[size_t(c)])];
        if (mass > 0 && sampler.uniform() * mass < double(rc)) { chosen = c; break; }
        mass -= double(rc);
        rc = 0.0f;  // max(r - onehot(c), 0), renormalised implicitly through `mass`
      }
      if (chosen < 0) {
        // Rounding can leave no mass when the children covered the whole support; that event has
        // probability zero, and p itself is then the distribution to draw from.
        v.next = mass > 1e-6 ? sampler.draw(r) : sampler.sample(raw, vocab, at ? &*at : nullptr);
        return v;
      }
    }
    v.path.push_back(chosen);
    node = chosen;
    if (at) at->accept(sampler.params().vocabulary->bytes(tree.tokens[size_t(chosen)]));
  }
}

}  // namespace eaglet
