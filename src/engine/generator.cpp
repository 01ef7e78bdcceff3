#include "engine/generator.h"

#include <chrono>

#include "core/error.h"

namespace eaglet {

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void finalize_result(const OutputTracker& tracker, double decode_start, GenerationResult* res) {
  res->stats.decode_seconds = decode_start > 0 ? monotonic_seconds() - decode_start : 0;
  res->token_ids = tracker.tokens();
  res->stats.generated_tokens = int64_t(res->token_ids.size());
  res->text = tracker.text();
  res->finish_reason = tracker.finished() ? tracker.finish_reason() : "length";
}

int64_t kv_blocks_for(int64_t tokens, int block_size) { return (tokens + block_size - 1) / block_size + 1; }

std::vector<float> prefill(Model& model, KvCache& cache, SeqId seq, const std::vector<int>& ids, int chunk,
                           const std::vector<int>& tap_layers, std::vector<float>* taps) {
  EAGLET_CHECK(!ids.empty(), "empty prompt");
  ForwardOutput out;
  for (size_t b = 0; b < ids.size(); b += size_t(chunk)) {
    const size_t e = std::min(ids.size(), b + size_t(chunk));
    ForwardBatch batch;
    SeqChunk c{seq, std::vector<int>(ids.begin() + long(b), ids.begin() + long(e)), {}};
    if (e == ids.size()) c.logit_rows = {int(e - b - 1)};
    batch.chunks.push_back(std::move(c));
    batch.tap_layers = tap_layers;
    model.forward(cache, batch, &out);
    if (taps) taps->insert(taps->end(), out.taps.begin(), out.taps.end());
  }
  return out.logits;
}

GenerationResult generate(Model& model, const Tokenizer& tok, const GenerationRequest& req) {
  const ModelConfig& cfg = model.config();
  validate(req.sampling);
  const int64_t total = int64_t(req.prompt_ids.size()) + req.stop.max_tokens;
  if (int64_t(req.prompt_ids.size()) >= cfg.max_position)
    fail("prompt of {} tokens does not fit the model's context of {} tokens", req.prompt_ids.size(), cfg.max_position);
  KvCache cache(model.kv_shape(kv_blocks_for(std::min<int64_t>(total, cfg.max_position))));
  const SeqId seq = cache.create();
  Sampler sampler(req.sampling);
  OutputTracker tracker(tok, req.stop);
  GenerationResult res;
  res.prompt_ids = req.prompt_ids;

  double t0 = monotonic_seconds();
  std::vector<float> logits = prefill(model, cache, seq, req.prompt_ids, req.prefill_chunk);
  res.stats.prompt_tokens = int64_t(req.prompt_ids.size());
  res.stats.prefill_seconds = monotonic_seconds() - t0;

  const int V = cfg.vocab;
  t0 = 0;
  double last = 0;
  while (true) {
    const int token = sampler.sample(logits.data(), V);
    const double now = monotonic_seconds();
    if (t0 == 0) t0 = now;
    else res.stats.inter_token_seconds.push_back(now - last);
    last = now;
    const bool more = tracker.append(token);
    if (req.on_text) {
      const std::string delta = tracker.take_new_text();
      if (!delta.empty()) req.on_text(delta);
    }
    if (!more) break;
    if (cache.length(seq) + 1 >= cfg.max_position) break;  // context full: "length"
    ForwardBatch batch;
    batch.chunks.push_back(SeqChunk{seq, {token}, {0}});
    ForwardOutput out;
    model.forward(cache, batch, &out);
    logits.swap(out.logits);
  }
  finalize_result(tracker, t0, &res);
  return res;
}

}  // namespace eaglet
