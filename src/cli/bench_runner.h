// The decode loop behind `eaglet bench` and `eaglet demo`: the same prompts through the target,
// plainly or with a proposer, with decode time and tokens summed over prompts.
#pragma once
#include <vector>

#include "engine/model_bundle.h"
#include "spec/metrics.h"
#include "spec/spec_setup.h"

namespace eaglet {
struct SamplingParams;
}

namespace eaglet::cli {

struct RunTotals {
  int64_t tokens = 0;  // decode tokens (after the first of each prompt)
  double seconds = 0;
  SpecMetrics spec;
  std::vector<std::vector<int>> outputs;
  double tokens_per_second() const { return seconds > 0 ? double(tokens) / seconds : 0; }
};

RunTotals run_prompts(ModelBundle& b, const std::vector<std::vector<int>>& prompts, int max_tokens,
                      const SamplingParams& sampling, bool ignore_eos, const SpecSetup* spec);

}  // namespace eaglet::cli
