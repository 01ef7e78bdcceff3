#include "engine/tap_history.h"

#include <algorithm>

#include "core/splitmix.h"

namespace eaglet {

TapHistory::TapHistory(const CaptureOptions& opts, int hidden, size_t draft_taps, size_t row_taps)
    : opts_(opts), hidden_(size_t(hidden)), draft_taps_(draft_taps), row_taps_(row_taps) {}

void TapHistory::admit(SeqId seq, const Request& r) {
  Entry& e = seqs_[seq] = Entry{};
  if (opts_.sink && !r.no_capture) {
    uint64_t state = opts_.seed + draws_++;
    e.capture = double(splitmix64(state) >> 11) * 0x1.0p-53 < opts_.fraction;
  }
}

void TapHistory::record(SeqId seq, const int* tokens, const float* rows, size_t n) {
  Entry& e = seqs_.at(seq);
  const size_t aux = draft_taps_ * hidden_;
  for (size_t i = 0; i < n; ++i) {
    const float* r = rows + i * row_taps_ * hidden_;
    e.ids.push_back(tokens[i]);
    e.aux.insert(e.aux.end(), r, r + aux);
    if (e.capture) e.last.insert(e.last.end(), r + aux, r + aux + hidden_);  // the last tap: layer L
  }
}

void TapHistory::finish(SeqId seq, const Request& r, const std::string& reason, int draft_version) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  const size_t P = r.prompt.size();
  // Only sequences that generated past the prompt's last position teach the draft anything.
  if (it->second.capture && reason != "abort" && std::min(it->second.ids.size(), size_t(opts_.max_tokens)) >= P + 1)
    opts_.sink->consume(sample(it->second, P, draft_version));
  seqs_.erase(it);
}

// The first max_tokens rows, with the loss on every position whose draft target was generated.
CapturedSequence TapHistory::sample(const Entry& e, size_t P, int draft_version) const {
  const size_t T = std::min(e.ids.size(), size_t(opts_.max_tokens)), aux = draft_taps_ * hidden_;
  CapturedSequence c;
  c.ids.assign(e.ids.begin(), e.ids.begin() + long(T));
  c.loss_mask.resize(T);
  for (size_t t = 0; t < T; ++t) c.loss_mask[t] = t + 1 >= P;
  c.aux.assign(e.aux.begin(), e.aux.begin() + long(T * aux));
  c.last.assign(e.last.begin(), e.last.begin() + long(T * hidden_));
  c.hidden = int(hidden_);
  c.prompt_tokens = int(P);
  c.draft_version = draft_version;
  return c;
}

}  // namespace eaglet
