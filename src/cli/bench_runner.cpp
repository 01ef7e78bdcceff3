#include "cli/bench_runner.h"

#include "spec/speculative_generator.h"

namespace eaglet::cli {

RunTotals run_prompts(ModelBundle& b, const std::vector<std::vector<int>>& prompts, int max_tokens,
                      const SamplingParams& sampling, bool ignore_eos, const SpecSetup* spec) {
  RunTotals t;
  for (auto& ids : prompts) {
    GenerationRequest req;
    req.prompt_ids = ids;
    req.sampling = sampling;
    req.stop.max_tokens = max_tokens;
    req.stop.stop_tokens = b.eos_ids;
    req.stop.ignore_eos = ignore_eos;
    GenerationResult r;
    if (spec && spec->enabled()) {
      auto proposer = spec->new_proposer(int(ids.size()) + max_tokens + spec->k() + 1);
      r = generate_speculative(*b.model, b.tokenizer, *proposer, req, spec->k(), &t.spec);
    } else {
      r = generate(*b.model, b.tokenizer, req);
    }
    t.tokens += std::max<int64_t>(0, r.stats.generated_tokens - 1);
    t.seconds += r.stats.decode_seconds;
    t.outputs.push_back(r.token_ids);
  }
  return t;
}

}  // namespace eaglet::cli
