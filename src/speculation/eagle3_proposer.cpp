#include "speculation/eagle3_proposer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "core/error.h"

namespace eaglet {

Eagle3Proposer::Eagle3Proposer(const Eagle3Draft& draft, int64_t num_blocks, ThreadPool& pool)
    : draft_(draft), pool_(pool), cache_(draft.kv_shape(num_blocks)) {}

void Eagle3Proposer::begin(SeqId seq, const std::vector<int>& prompt, const float* prompt_taps, int first_token) {
  EAGLET_CHECK(!states_.count(seq), "EAGLE-3 proposer: sequence {} began twice", seq);
  State& st = states_[seq];
  st.kv = cache_.create();
  st.pending_tokens.assign(prompt.begin() + 1, prompt.end());
  st.pending_tokens.push_back(first_token);
  const size_t A = 3 * size_t(draft_.config().target_hidden);
  st.pending_aux.assign(prompt_taps, prompt_taps + prompt.size() * A);
}

void Eagle3Proposer::end(SeqId seq) {
  auto it = states_.find(seq);
  if (it == states_.end()) return;
  cache_.free(it->second.kv);
  states_.erase(it);
}

void Eagle3Proposer::accept(const std::vector<Accepted>& accepted) {
  const size_t A = 3 * size_t(draft_.config().target_hidden);
  for (auto& a : accepted) {
    State& st = states_.at(a.seq);
    st.pending_tokens.insert(st.pending_tokens.end(), a.tokens.begin(), a.tokens.end());
    st.pending_aux.insert(st.pending_aux.end(), a.taps, a.taps + a.tokens.size() * A);
  }
}

std::vector<Eagle3Proposer::Candidate> Eagle3Proposer::top_candidates(const float* logits, int k) const {
  const int Vd = draft_.config().draft_vocab;
  k = std::min(k, Vd);
  const float mx = *std::max_element(logits, logits + Vd);
  double z = 0;
  for (int i = 0; i < Vd; ++i) z += std::exp(double(logits[i] - mx));
  std::vector<int> idx(static_cast<size_t>(Vd));
  std::iota(idx.begin(), idx.end(), 0);
  // Ties by id, so drafts (and with them greedy outputs) do not depend on the sort's whims.
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  std::vector<Candidate> out;
  for (int i = 0; i < k; ++i)
    out.push_back({draft_.to_target_id(idx[size_t(i)]), float(std::exp(double(logits[idx[size_t(i)]] - mx)) / z)});
  return out;
}

std::vector<Eagle3Proposer::Candidate> Eagle3Proposer::top_allowed(const float* logits, int k, const constrain::Matcher& at,
                                                                    const constrain::TokenTrie& vocabulary) const {
  const int Vd = draft_.config().draft_vocab;
  const constrain::TokenTrie::Mask ok = vocabulary.allowed(at);
  std::vector<float> masked(logits, logits + Vd);
  int allowed = 0;
  for (int i = 0; i < Vd; ++i) {
    const int t = draft_.to_target_id(i);
    if (t < int(ok->size()) && (*ok)[size_t(t)]) ++allowed;
    else masked[size_t(i)] = -std::numeric_limits<float>::infinity();
  }
  if (allowed == 0) return {};
  return top_candidates(masked.data(), std::min(k, allowed));
}

void Eagle3Proposer::flush(const std::vector<Request>& requests) {
  const int64_t H = draft_.config().hidden, A = 3 * int64_t(draft_.config().target_hidden);
  std::vector<Eagle3Rows> chunks;
  std::vector<State*> who;
  std::vector<float> aux;
  for (const Request& r : requests) {
    State& st = states_.at(r.seq);
    if (st.pending_tokens.empty()) continue;
    cache_.truncate(st.kv, st.exact_len);  // drop the speculative tail of the last draft
    chunks.push_back(Eagle3Rows{st.kv, st.pending_tokens});
    who.push_back(&st);
    aux.insert(aux.end(), st.pending_aux.begin(), st.pending_aux.end());
  }
  if (chunks.empty()) return;
  const int64_t n = int64_t(aux.size() / size_t(A));
  std::vector<float> g(size_t(n * H)), out(size_t(n * H)), logits;
  draft_.fuse_aux(pool_, aux.data(), n, g.data());
  draft_.forward(pool_, cache_, chunks, g.data(), out.data(), &logits);
  const int Vd = draft_.config().draft_vocab;
  int64_t row = 0;
  for (size_t i = 0; i < who.size(); ++i) {
    State& st = *who[i];
    row += int64_t(st.pending_tokens.size());
    st.exact_len += int64_t(st.pending_tokens.size());
    st.last.assign(out.begin() + (row - 1) * H, out.begin() + row * H);
    st.root = top_candidates(logits.data() + i * size_t(Vd), kMaxTopk);
    st.root_logits.assign(logits.begin() + int64_t(i) * Vd, logits.begin() + int64_t(i + 1) * Vd);
    st.pending_tokens.clear();
    st.pending_aux.clear();
  }
}

namespace {
struct TreeNode {
  int token, parent;
  float score;
  int fwd = -1;       // index among this draft's forwarded nodes (its draft-cache row offset)
  uint64_t mask = 0;  // forwarded ancestors and itself
  int state = -1;     // under a grammar: index of its state after the path (Work::grammar)
};

// The `k` best-scored of nodes[from..] in score order (ties: the earlier first, so a parent stays
// ahead of an equal child).
std::vector<int> best_of(const std::vector<TreeNode>& nodes, size_t from, int k) {
  std::vector<int> idx(nodes.size() - from);
  std::iota(idx.begin(), idx.end(), int(from));
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return nodes[size_t(a)].score > nodes[size_t(b)].score; });
  if (int(idx.size()) > k) idx.resize(size_t(k));
  return idx;
}
}  // namespace

// One sequence's tree as it grows, level by level.
struct Eagle3Proposer::Work {
  State* st = nullptr;
  TreeShape shape;
  const constrain::TokenTrie* vocabulary = nullptr;  // set under a grammar
  std::vector<constrain::Matcher> grammar;           // grammar states of the nodes
  // The children of `parent` (-1: the root): the top-k of `logits`, under a grammar among what it
  // allows after the parent's path (`at`, copied first: the states grow as children are added).
  void add_children(const Eagle3Proposer& p, int parent, float score, const float* logits, const constrain::Matcher* at) {
    const std::optional<constrain::Matcher> base = at ? std::optional<constrain::Matcher>(*at) : std::nullopt;
    const auto cands = base ? p.top_allowed(logits, shape.topk, *base, *vocabulary) : p.top_candidates(logits, shape.topk);
    for (const auto& c : cands) {
      nodes.push_back({c.token, parent, score * c.prob});
      if (!base) continue;
      constrain::Matcher m = *base;
      m.accept(vocabulary->bytes(c.token));
      nodes.back().state = int(grammar.size());
      grammar.push_back(std::move(m));
    }
  }
  std::vector<TreeNode> nodes;
  std::vector<int> frontier;               // nodes to expand at the next depth
  std::vector<std::vector<float>> states;  // output state per forwarded node
};

void Eagle3Proposer::propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) {
  flush(requests);
  int max_depth = 0;
  std::vector<Work> work = plant(requests, &max_depth);
  for (int d = 2; d <= max_depth; ++d)
    if (!grow(work, d)) break;
  // Keep the `budget` best nodes. A child's score never exceeds its parent's and the stable sort
  // keeps a parent (created first) ahead of an equal child, so every prefix is a tree.
  trees->assign(requests.size(), DraftTree{});
  for (size_t i = 0; i < requests.size(); ++i) {
    const Work& w = work[i];
    if (w.nodes.empty()) continue;
    std::vector<int> new_index(w.nodes.size(), -1);
    DraftTree& t = (*trees)[i];
    for (int n : best_of(w.nodes, 0, w.shape.budget)) {
      const TreeNode& node = w.nodes[size_t(n)];
      EAGLET_CHECK(node.parent < 0 || new_index[size_t(node.parent)] >= 0, "draft tree: node kept without its parent");
      new_index[size_t(n)] = t.size();
      t.add(node.token, node.parent >= 0 ? new_index[size_t(node.parent)] : -1, node.score);
    }
  }
}

// Each request's shape within what the masks hold, and its first level: the root's top-k
// candidates, from the last flush.
std::vector<Eagle3Proposer::Work> Eagle3Proposer::plant(const std::vector<Request>& requests, int* max_depth) {
  std::vector<Work> work(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    Work& w = work[i];
    w.st = &states_.at(requests[i].seq);
    TreeShape s = requests[i].shape;
    s.topk = std::clamp(s.topk, 1, kMaxTopk);
    s.depth = std::min(s.depth, 1 + kMaxTreeTokens / s.topk);  // forwarded nodes fit the 64-bit masks
    s.budget = std::min(s.budget, kMaxTreeTokens - 1);         // the root joins them in verification
    w.shape = s;
    if (s.empty() || w.st->root.empty()) continue;
    if (requests[i].grammar && requests[i].vocabulary) {
      w.vocabulary = requests[i].vocabulary;
      w.add_children(*this, -1, 1.0f, w.st->root_logits.data(), requests[i].grammar);
    } else {
      for (int c = 0; c < std::min<int>(s.topk, int(w.st->root.size())); ++c)
        w.nodes.push_back({w.st->root[size_t(c)].token, -1, w.st->root[size_t(c)].prob});
    }
    if (w.nodes.empty()) continue;
    w.frontier = best_of(w.nodes, 0, s.topk);
    *max_depth = std::max(*max_depth, s.depth);
  }
  return work;
}

// Level d of every tree that reaches it: one draft forward over all frontiers (each node sees its
// forwarded ancestors), then each expanded node's top-k children, and the next frontier. False
// when no tree reaches level d.
bool Eagle3Proposer::grow(std::vector<Work>& work, int d) {
  const int64_t H = draft_.config().hidden;
  const int Vd = draft_.config().draft_vocab;
  std::vector<Eagle3Rows> chunks;
  std::vector<Work*> who;
  std::vector<float> gin;
  for (Work& w : work) {
    if (d > w.shape.depth || w.frontier.empty()) continue;
    Eagle3Rows r{w.st->kv, {}};
    for (int n : w.frontier) {
      TreeNode& node = w.nodes[size_t(n)];
      node.fwd = int(w.states.size()) + int(r.tokens.size());
      node.mask = (node.parent >= 0 ? w.nodes[size_t(node.parent)].mask : 0) | (uint64_t(1) << node.fwd);
      r.tokens.push_back(node.token);
      r.slots.push_back({w.st->kv, w.st->exact_len + d - 2, 0, w.st->exact_len, node.mask});
      const std::vector<float>& g = node.parent >= 0 ? w.states[size_t(w.nodes[size_t(node.parent)].fwd)] : w.st->last;
      gin.insert(gin.end(), g.begin(), g.end());
    }
    chunks.push_back(std::move(r));
    who.push_back(&w);
  }
  if (chunks.empty()) return false;
  std::vector<float> next(gin.size()), logits;
  draft_.forward(pool_, cache_, chunks, gin.data(), next.data(), &logits, /*all_logits=*/true);
  size_t row = 0;
  for (Work* w : who) {
    const size_t first_new = w->nodes.size();
    const std::vector<int> expanded = w->frontier;
    for (int n : expanded) {
      w->states.emplace_back(next.begin() + int64_t(row) * H, next.begin() + int64_t(row + 1) * H);
      const TreeNode node = w->nodes[size_t(n)];
      const constrain::Matcher* at = node.state >= 0 ? &w->grammar[size_t(node.state)] : nullptr;
      w->add_children(*this, n, node.score, logits.data() + row * size_t(Vd), at);
      ++row;
    }
    w->frontier = best_of(w->nodes, first_new, w->shape.topk);
  }
  return true;
}

}  // namespace eaglet
