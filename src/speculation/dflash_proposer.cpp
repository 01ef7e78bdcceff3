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

// The top-k tokens of `row` that the grammar state `at` allows (their probabilities renormalised
// over the allowed ones); fewer when fewer are allowed.
std::vector<std::pair<double, int>> allowed_tokens(const float* row, int vocab, int k, const constrain::Matcher& at,
                                                   const constrain::TokenTrie& vocabulary) {
  std::vector<float> masked(row, row + vocab);
  vocabulary.mask(at, masked.data(), vocab);
  if (std::all_of(masked.begin(), masked.end(), [](float x) { return std::isinf(x) && x < 0; })) return {};
  auto top = top_tokens(masked.data(), vocab, k);
  top.erase(std::remove_if(top.begin(), top.end(), [](const auto& t) { return t.first <= 0; }), top.end());
  return top;
}

// Best-first over the block: a node at depth d has the top-k tokens of position d as children,
// scored with its path probability times theirs (the block's positions are drafted together, so
// a position's candidates do not depend on the token chosen before it, unless a grammar holds
// the draft: then they are the top-k the grammar allows after the node's path). With topk 1 this
// is the chain of the block's greedy tokens. Nodes are added in order of score, so every prefix
// of the tree is a tree and the policy can cut it anywhere.
DraftTree block_tree(const float* logits, int vocab, const Proposer::Request& r, int positions) {
  const TreeShape& shape = r.shape;
  const int depth = std::min(shape.depth, positions);
  const bool held = r.grammar && r.vocabulary;
  // Candidate lists: one per position, or under a grammar one per parent (its state decides).
  std::vector<std::vector<std::pair<double, int>>> lists;
  std::vector<int> per_position(size_t(depth), -1);
  std::vector<constrain::Matcher> states;  // under a grammar: the state after each tree node
  auto list_at = [&](int d, int parent) {
    const float* row = logits + size_t(d) * size_t(vocab);
    if (!held) {
      if (per_position[size_t(d)] < 0) {
        per_position[size_t(d)] = int(lists.size());
        lists.push_back(top_tokens(row, vocab, shape.topk));
      }
      return per_position[size_t(d)];
    }
    lists.push_back(allowed_tokens(row, vocab, shape.topk, parent < 0 ? *r.grammar : states[size_t(parent)], *r.vocabulary));
    return int(lists.size()) - 1;
  };
  struct Candidate {
    double score, parent_score;
    int parent, depth, list, rank;  // rank: which of the list's tokens
    bool operator<(const Candidate& o) const { return score < o.score; }
  };
  std::priority_queue<Candidate> next;
  if (depth > 0) {
    const int root = list_at(0, -1);
    if (!lists[size_t(root)].empty()) next.push({lists[size_t(root)][0].first, 1.0, -1, 0, root, 0});
  }
  DraftTree tree;
  while (!next.empty() && tree.size() < shape.budget) {
    const Candidate c = next.top();
    next.pop();
    const int token = lists[size_t(c.list)][size_t(c.rank)].second;
    tree.add(token, c.parent, float(c.score));
    if (held) {
      states.push_back(c.parent < 0 ? *r.grammar : states[size_t(c.parent)]);
      states.back().accept(r.vocabulary->bytes(token));
    }
    // Its next sibling, and its own first child.
    const auto& siblings = lists[size_t(c.list)];
    if (c.rank + 1 < int(siblings.size()))
      next.push({c.parent_score * siblings[size_t(c.rank) + 1].first, c.parent_score, c.parent, c.depth, c.list, c.rank + 1});
    if (c.depth + 1 < depth) {
      const int children = list_at(c.depth + 1, tree.size() - 1);
      if (!lists[size_t(children)].empty())
        next.push({c.score * lists[size_t(children)][0].first, c.score, tree.size() - 1, c.depth + 1, children, 0});
    }
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
                                      requests[drafted[j]], c.block_size - 1);
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
