// The decode loop behind `eaglet bench` and `eaglet demo`: the same prompts through the target,
// plainly or with a proposer, with decode time and tokens summed over prompts.
#pragma once
#include <functional>
#include <vector>

#include "core/memory_bandwidth.h"
#include "engine/model_bundle.h"
#include "speculation/metrics.h"
#include "speculation/spec_setup.h"

namespace eaglet {
struct SamplingParams;
}

namespace eaglet::cli {

struct RunTotals {
  int64_t tokens = 0;  // decode tokens (after the first of each prompt)
  double seconds = 0;
  std::vector<double> inter_token_seconds;  // plain decode only
  SpecMetrics spec;
  std::vector<std::vector<int>> outputs;
  double tokens_per_second() const { return seconds > 0 ? double(tokens) / seconds : 0; }
};

// One forward pass after a prefilled prompt: its time and what it read.
struct PassCost {
  double seconds = 0;
  double weight_gb = 0;
  int64_t experts_touched = 0;  // distinct experts summed over MoE layers (0 for dense models)
};

// A single-token decode step versus a `verify_tokens`-token verification pass on the same
// prefix (each the median of `reps` passes, the cache rolled back after every pass). On MoE targets
// the verification pass reads the union of the experts its tokens route to.
struct VerifyCost {
  int verify_tokens = 0;
  PassCost step, verify;
  double ratio() const { return step.seconds > 0 ? verify.seconds / step.seconds : 0; }
};
// Every forward runs on `pool`.
VerifyCost measure_verify_cost(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int verify_tokens, int reps);
// The same for a 16-node token tree (4 root children with 3 children each) plus its root.
VerifyCost measure_tree_verify_cost(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int reps);

// `after_prompt` (optional) runs after each prompt with that prompt's decode seconds.
// One prompt at a time (a server at concurrency 1): tokens and seconds are decode only, after
// each prompt's first token.
RunTotals run_prompts(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts, int max_tokens,
                      const SamplingParams& sampling, bool ignore_eos, const SpecSetup* spec,
                      const std::function<void(double decode_seconds)>& after_prompt = {});

// Every prompt through one engine `max_seqs` sequences at a time (a server at concurrency
// `max_seqs`, vLLM's `bench throughput --max-num-seqs`): tokens are all generated tokens and seconds
// the whole run's wall time, prefill included, since steps mix prefill and decode.
RunTotals run_prompts_batched(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts,
                              int max_tokens, const SamplingParams& sampling, bool ignore_eos, const SpecSetup* spec,
                              int max_seqs);

// The plain decode of every prompt with the memory bandwidth probed before the first prompt and
// after each one. On a shared VM the bandwidth can halve for a minute and come back, so besides
// the best probe of the run each prompt's decode is also set against the better of the two probes
// around it (`nearby_*`: decode seconds weighted).
struct ProbedBaseline {
  RunTotals totals;
  std::vector<MemoryBandwidth> probes;
  MemoryBandwidth best;    // the best read and copy figures of all probes
  MemoryBandwidth nearby;  // bandwidth around each prompt, averaged over decode time
};
ProbedBaseline run_baseline_with_probes(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts, int max_tokens,
                                        const SamplingParams& sampling, bool ignore_eos, bool probe);

}  // namespace eaglet::cli
