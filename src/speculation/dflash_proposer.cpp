#include "speculation/dflash_proposer.h"

#include <algorithm>

namespace eaglet {

DFlashProposer::DFlashProposer(const DFlashDraft& draft, int64_t kv_blocks, ThreadPool& pool)
    : draft_(draft), pool_(pool), cache_(draft.kv_shape(kv_blocks)) {}

namespace {
size_t tap_row(const DFlashConfig& c) { return c.taps.size() * size_t(c.target_hidden); }
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

// The context catches up with everything verified, then one block per sequence: its greedy
// tokens at positions 1..B-1 form the chain.
void DFlashProposer::propose(const std::vector<Request>& requests, std::vector<DraftTree>* trees) {
  trees->assign(requests.size(), DraftTree{});
  for (size_t i = 0; i < requests.size(); ++i) {
    State& s = seqs_.at(requests[i].seq);
    const size_t row = tap_row(draft_.config());
    draft_.add_context(pool_, cache_, s.kv, s.pending.data(), int64_t(s.pending.size() / row));
    s.pending.clear();
    const TreeShape& shape = requests[i].shape;
    if (shape.empty()) continue;
    draft_.draft_block(pool_, cache_, s.kv, s.last, &logits_);
    const int vocab = int(logits_.size() / size_t(draft_.config().block_size - 1));
    const int n = std::min({shape.depth, shape.budget, draft_.config().block_size - 1});
    std::vector<int> chain;
    for (int k = 0; k < n; ++k) {
      const float* r = logits_.data() + size_t(k) * size_t(vocab);
      chain.push_back(int(std::max_element(r, r + vocab) - r));
    }
    (*trees)[i] = DraftTree::chain(chain);
  }
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
