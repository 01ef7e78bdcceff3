#include "spec/speculative_generator.h"

#include <algorithm>

#include "core/error.h"
#include "spec/verifier.h"

namespace eaglet {

GenerationResult generate_speculative(Model& target, const Tokenizer& tok, Proposer& proposer,
                                      const GenerationRequest& req, int k, SpecMetrics* metrics) {
  const ModelConfig& cfg = target.config();
  validate(req.sampling);
  EAGLET_CHECK(k >= 0, "number of speculative tokens must be >= 0 (got {})", k);
  const int64_t P = int64_t(req.prompt_ids.size());
  if (P >= cfg.max_position)
    fail("prompt of {} tokens does not fit the model's context of {} tokens", P, cfg.max_position);
  const int64_t capacity = std::min<int64_t>(P + req.stop.max_tokens + k + 1, cfg.max_position);
  KvCache cache(target.kv_shape(kv_blocks_for(capacity)));
  const SeqId seq = cache.create();
  Sampler sampler(req.sampling);
  OutputTracker tracker(tok, req.stop);
  GenerationResult res;
  res.prompt_ids = req.prompt_ids;
  SpecMetrics local;
  SpecMetrics& m = metrics ? *metrics : local;
  const std::vector<int> taps = proposer.tap_layers();
  const int V = cfg.vocab;

  auto emit = [&](int token) {
    const bool more = tracker.append(token);
    if (req.on_text) {
      const std::string delta = tracker.take_new_text();
      if (!delta.empty()) req.on_text(delta);
    }
    return more;
  };

  double t0 = monotonic_seconds();
  std::vector<float> prompt_taps;
  std::vector<float> logits = prefill(target, cache, seq, req.prompt_ids, req.prefill_chunk, taps, &prompt_taps);
  res.stats.prompt_tokens = P;
  res.stats.prefill_seconds = monotonic_seconds() - t0;

  int last = sampler.sample(logits.data(), V);
  const double decode_start = monotonic_seconds();
  bool more = emit(last);
  if (more) {
    t0 = monotonic_seconds();
    proposer.begin(req.prompt_ids, prompt_taps, last);
    m.draft_seconds += monotonic_seconds() - t0;
  }
  while (more && cache.length(seq) + 1 < cfg.max_position) {
    const int64_t len = cache.length(seq);
    const int remaining = req.stop.max_tokens - int(tracker.tokens().size());
    const int kk = std::max(0, std::min<int>({k, remaining - 1, int(cfg.max_position - len - 1)}));
    t0 = monotonic_seconds();
    std::vector<int> drafts = kk > 0 ? proposer.draft(kk) : std::vector<int>{};
    if (int(drafts.size()) > kk) drafts.resize(size_t(kk));
    const double t1 = monotonic_seconds();
    m.draft_seconds += t1 - t0;

    ForwardBatch batch;
    SeqChunk chunk{seq, {last}, {0}};
    for (size_t i = 0; i < drafts.size(); ++i) {
      chunk.tokens.push_back(drafts[i]);
      chunk.logit_rows.push_back(int(i + 1));
    }
    batch.chunks.push_back(std::move(chunk));
    batch.tap_layers = taps;
    ForwardOutput out;
    target.forward(cache, batch, &out);
    const double t2 = monotonic_seconds();
    m.target_seconds += t2 - t1;

    const Verdict v = verify_drafts(out.logits.data(), V, drafts, sampler);
    m.record(int(drafts.size()), v.accepted);
    cache.truncate(seq, len + 1 + v.accepted);
    m.verify_seconds += monotonic_seconds() - t2;

    for (int i = 0; i < v.accepted && more; ++i) more = emit(drafts[size_t(i)]);
    if (more) more = emit(v.next);
    if (!more) break;
    t0 = monotonic_seconds();
    proposer.accept(v.accepted, v.next, out.taps.data());
    m.draft_seconds += monotonic_seconds() - t0;
    last = v.next;
  }
  finalize_result(tracker, decode_start, &res);
  return res;
}

}  // namespace eaglet
