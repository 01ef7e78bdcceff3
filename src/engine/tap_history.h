// What online training and draft swaps keep of each served sequence: every token the target ran
// over, with the draft's taps of it and, for captured sequences, the last layer's output. The
// engine core tells it about each sequence as it runs (admitted, rows the target ran, finished)
// and asks it for a sequence's history when a new draft must be brought up to date; it holds
// nothing else of the engine's, and an engine without online training has none.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/kv_cache.h"
#include "engine/request.h"
#include "engine/sample_sink.h"

namespace eaglet {

class TapHistory {
 public:
  // Each recorded row holds `row_taps` layers of `hidden` floats: the draft's `draft_taps` first,
  // then (when `opts.sink` is set) the last layer's output.
  TapHistory(const CaptureOptions& opts, int hidden, size_t draft_taps, size_t row_taps);

  // A sequence starts: whether it is captured is drawn here (seeded, in admission order).
  void admit(SeqId seq, const Request& r);
  // `n` tokens the target ran for `seq`, in order, with their tap rows.
  void record(SeqId seq, const int* tokens, const float* rows, size_t n);
  // The sequence leaves: a captured one that generated something (and was not aborted) goes to
  // the sink as a training sample, served by draft `draft_version`.
  void finish(SeqId seq, const Request& r, const std::string& reason, int draft_version);

  // The tokens recorded for `seq` and their draft taps [tokens, draft_taps * hidden].
  const std::vector<int>& tokens(SeqId seq) const { return seqs_.at(seq).ids; }
  const float* draft_taps(SeqId seq) const { return seqs_.at(seq).aux.data(); }

 private:
  struct Entry {
    std::vector<int> ids;
    std::vector<float> aux, last;
    bool capture = false;
  };
  CapturedSequence sample(const Entry& e, size_t prompt_tokens, int draft_version) const;

  CaptureOptions opts_;
  size_t hidden_, draft_taps_, row_taps_;
  uint64_t draws_ = 0;
  std::unordered_map<SeqId, Entry> seqs_;
};

}  // namespace eaglet
