#include "tokenizer/bpe.h"

#include <queue>

namespace eaglet {

std::vector<int> bpe_merge(const std::vector<int>& symbols, const MergeFn& merge) {
  const int n = int(symbols.size());
  if (n < 2) return symbols;
  std::vector<int> id(symbols), prev(symbols.size()), next(symbols.size());
  std::vector<bool> alive(symbols.size(), true);
  for (int i = 0; i < n; ++i) {
    prev[size_t(i)] = i - 1;
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    double priority;
    int left, right, left_id, right_id, merged;
    bool operator>(const Cand& o) const {
      return priority != o.priority ? priority > o.priority : left > o.left;
    }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int l) {
    const int r = next[size_t(l)];
    if (l < 0 || r < 0) return;
    MergeResult m = merge(id[size_t(l)], id[size_t(r)]);
    if (m.ok) heap.push({m.priority, l, r, id[size_t(l)], id[size_t(r)], m.merged_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    // Skip candidates made stale by an earlier merge of either side.
    if (!alive[size_t(c.left)] || !alive[size_t(c.right)] || next[size_t(c.left)] != c.right ||
        id[size_t(c.left)] != c.left_id || id[size_t(c.right)] != c.right_id)
      continue;
    id[size_t(c.left)] = c.merged;
    alive[size_t(c.right)] = false;
    next[size_t(c.left)] = next[size_t(c.right)];
    if (next[size_t(c.right)] >= 0) prev[size_t(next[size_t(c.right)])] = c.left;
    if (prev[size_t(c.left)] >= 0) push(prev[size_t(c.left)]);
    push(c.left);
  }
  std::vector<int> out;
  for (int i = 0; i >= 0; i = next[size_t(i)]) out.push_back(id[size_t(i)]);
  return out;
}

}  // namespace eaglet
