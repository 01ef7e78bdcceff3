#include "speculation/dflash_proposer.h"

#include <algorithm>
#include <cmath>

namespace eaglet {

DFlashProposer::DFlashProposer(const DFlashDraft& draft, int64_t kv_blocks, ThreadPool& pool)
    : draft_(draft), pool_(pool), cache_(draft.kv_shape(kv_blocks)) {}

namespace {
size_t tap_row(const DFlashConfig& c) { return c.taps.size() * size_t(c.target_hidden); }

// softmax(row)[argmax] = 1 / sum(exp(l - max)).
double top_probability(const float* row, int vocab, float max) {
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(double(row[v] - max));
  return 1.0 / sum;
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
// block: its greedy tokens at positions 1..B-1 form the chain.
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
  for (size_t j = 0; j < blocks.size(); ++j) {
    const TreeShape& shape = requests[drafted[j]].shape;
    const int n = std::min({shape.depth, shape.budget, c.block_size - 1});
    DraftTree& chain = (*trees)[drafted[j]];
    double path = 1;
    for (int k = 0; k < n; ++k) {
      const float* r = logits_.data() + (j * size_t(c.block_size - 1) + size_t(k)) * size_t(vocab);
      const float* top = std::max_element(r, r + vocab);
      path *= top_probability(r, vocab, *top);
      chain.add(int(top - r), k - 1, float(path));
    }
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
