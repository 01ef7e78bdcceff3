#include "speculation/dflash_proposer.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace eaglet {

DFlashProposer::DFlashProposer(const DFlashDraft& draft, int64_t kv_blocks, ThreadPool& pool)
    : draft_(draft), pool_(pool), cache_(draft.kv_shape(kv_blocks)) {}

namespace {
size_t tap_row(const DFlashConfig& c) { return c.taps.size() * size_t(c.target_hidden); }

// The k most likely tokens of one block position and their draft probabilities, best first.
std::vector<std::pair<double, int>> top_tokens(const float* row, int vocab, int k) {
  std::vector<std::pair<float, int>> top;  // (logit, token), ascending; at most k
  for (int v = 0; v < vocab; ++v) {
    if (int(top.size()) == k && row[v] <= top.front().first) continue;
    // Before equal logits: of tied tokens the first stays the likeliest, as for the greedy argmax.
    top.insert(std::lower_bound(top.begin(), top.end(), std::make_pair(row[v], v),
                                [](const auto& a, const auto& b) { return a.first < b.first; }),
               {row[v], v});
    if (int(top.size()) > k) top.erase(top.begin());
  }
  const float max = top.back().first;
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(double(row[v] - max));
  std::vector<std::pair<double, int>> out;
  for (auto it = top.rbegin(); it != top.rend(); ++it) out.push_back({std::exp(double(it->first - max)) / sum, it->second});
  return out;
}

// Best-first over the block: a node at depth d has the top-k tokens of position d as children,
// scored with its path probability times theirs (the block's positions are drafted together, so
// a position's candidates do not depend on the token chosen before it). With topk 1 this is the
// chain of the block's greedy tokens. Nodes are added in order of score, so every prefix of the
// tree is a tree and the policy can cut it anywhere.
DraftTree block_tree(const float* logits, int vocab, const TreeShape& shape, int positions) {
  const int depth = std::min(shape.depth, positions);
  std::vector<std::vector<std::pair<double, int>>> top;
  for (int d = 0; d < depth; ++d) top.push_back(top_tokens(logits + size_t(d) * size_t(vocab), vocab, shape.topk));
  struct Candidate {
    double score, parent_score;
    int parent, depth, rank;  // rank: which of the position's top tokens
    bool operator<(const Candidate& o) const { return score < o.score; }
  };
  std::priority_queue<Candidate> next;
  next.push({top[0][0].first, 1.0, -1, 0, 0});
  DraftTree tree;
  while (!next.empty() && tree.size() < shape.budget) {
    const Candidate c = next.top();
    next.pop();
    const auto& candidates = top[size_t(c.depth)];
    tree.add(candidates[size_t(c.rank)].second, c.parent, float(c.score));
    // Its next sibling, and its own first child.
    if (c.rank + 1 < int(candidates.size()))
      next.push({c.parent_score * candidates[size_t(c.rank) + 1].first, c.parent_score, c.parent, c.depth, c.rank + 1});
    if (c.depth + 1 < depth)
      next.push({c.score * top[size_t(c.depth) + 1][0].first, c.score, tree.size() - 1, c.depth + 1, 0});
  }
  return tree;
}
}  // namespace

void DFlashProposer::begin(SeqId seq, const std::vector<int>& prompt, const float* prompt_taps, int first_token) {
  State& s = seqs_[seq];
  s.kv = cache_.create();
  s.last = first_token;
  s.pending.assign(prompt_taps, prompt_taps + prompt.size() * tap_row(draft_.config()));
}

void DFlashProposer::end(SeqId seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  cache_.free(it->second.kv);
  seqs_.erase(it);
}

// The contexts catch up with everything verified, then one forward drafts every sequence's
// block, and each block becomes its sequence's tree (block_tree).
void DFlashProposer::propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) {
  trees->assign(requests.size(), DraftTree{});
  const DFlashConfig& c = draft_.config();
  const size_t row = tap_row(c);
  std::vector<DFlashDraft::Context> context;
  std::vector<DFlashDraft::Block> blocks;
  std::vector<size_t> drafted;  // request index of each block
  for (size_t i = 0; i < requests.size(); ++i) {
    State& s = seqs_.at(requests[i].seq);
    context.push_back({s.kv, s.pending.data(), int64_t(s.pending.size() / row)});
    if (requests[i].shape.empty()) continue;
    blocks.push_back({s.kv, s.last});
    drafted.push_back(i);
  }
  draft_.add_context(pool_, cache_, context);
  for (const Request& r : requests) seqs_.at(r.seq).pending.clear();
  if (blocks.empty()) return;
  draft_.draft_blocks(pool_, cache_, blocks, &logits_);
  const int vocab = int(logits_.size() / (blocks.size() * size_t(c.block_size - 1)));
  for (size_t j = 0; j < blocks.size(); ++j)
    (*trees)[drafted[j]] = block_tree(logits_.data() + j * size_t(c.block_size - 1) * size_t(vocab), vocab,
                                      requests[drafted[j]].shape, c.block_size - 1);
}

// The root and the accepted drafts were verified: their taps become context; the target's own
// next token starts the next block.
void DFlashProposer::accept(const std::vector<Accepted>& accepted) {
  const size_t row = tap_row(draft_.config());
  for (const Accepted& a : accepted) {
    State& s = seqs_.at(a.seq);
    s.pending.insert(s.pending.end(), a.taps, a.taps + a.tokens.size() * row);
    s.last = a.tokens.back();
  }
}

}  // namespace eaglet
