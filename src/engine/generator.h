// One request run to completion on the engine core (engine/engine_core.h), on the calling
// thread: plain decoding without a SpecSetup (the baseline speculative decoding must reproduce
// and beat), speculative decoding with one. Also the chunked prefill helper the tools share.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/output_tracker.h"
#include "engine/request.h"
#include "sampling/sampler.h"
#include "models/model.h"
#include "models/prefill.h"

namespace eaglet {

struct GenerationStats {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  // Seconds between consecutive output tokens (inter-token latency); the tokens one speculative
  // step emits follow each other with ~0 s.
  std::vector<double> inter_token_seconds;
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0; }
  // The first token comes from the prefill logits; decode speed counts the tokens after it.
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated_tokens > 1 ? double(generated_tokens - 1) / decode_seconds : 0;
  }
};

struct GenerationResult {
  std::vector<int> prompt_ids, token_ids;
  std::string text, finish_reason;
  GenerationStats stats;
};

class EngineCore;
class SpecSetup;
struct SpecMetrics;

// Runs `req` on an idle engine until it finishes, collecting what it generated; the request's own
// callbacks (streaming text, say) are called as well.
GenerationResult run_request(EngineCore& engine, const std::shared_ptr<Request>& req);
// `req` on an engine on `pool` sized for it alone (engine/offline.h; speculative with `spec` when
// enabled); `metrics` (optional) receives the speculation counters.
GenerationResult generate(ThreadPool& pool, Model& model, const Tokenizer& tok, const std::shared_ptr<Request>& req,
                          const SpecSetup* spec = nullptr, SpecMetrics* metrics = nullptr);

// Seconds on a monotonic clock, for the stats above.
double monotonic_seconds();

}  // namespace eaglet
