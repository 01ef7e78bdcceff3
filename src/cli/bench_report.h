// What `eaglet bench` measures, as one report: the text printer shows each part as it is
// measured, and the JSON (--json; schema in the README) is written from the same struct.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench_runner.h"
#include "core/memory_bandwidth.h"

namespace eaglet::cli {

// What ran where.
struct BenchHeader {
  std::string model, kernels, cpu, cpu_features, amx, dataset, speculation;
  std::vector<std::pair<std::string, int>> matmul_kernels;  // kernel name -> matrices on it
  std::vector<std::pair<std::string, int>> draft_matmul_kernels;  // the same for the --draft model (empty: none)
  size_t num_prompts = 0;
  int max_tokens = 0;
  double temperature = 0;
  double active_weight_gb = 0;  // weights one token reads (MoE: routed experts only)
};

// --cost-curve: c(n) of the target forward and a 16-node tree's verification.
struct BenchCostCurve {
  std::vector<std::pair<int, double>> seconds;  // (tokens n, c(n) in seconds), n ascending from 1
  std::string chains_only;                      // architecture that verifies chains only ("": trees measured)
  VerifyCost tree;
};

// Plain decoding of every prompt, with the memory bandwidth probed around it.
struct BenchBaseline {
  ProbedBaseline run;            // decode totals, and the bandwidth probes when taken
  bool probed = false;           // false with --skip-bandwidth
  double weight_gb = 0;          // what one decode step reads
  double itl_p50 = 0, itl_p90 = 0, itl_p99 = 0;
  int max_num_seqs = 1;          // > 1: batched (--max-num-seqs), totals are output tok/s of the whole run
  const RunTotals& totals() const { return run.totals; }
  double bandwidth() const { return totals().tokens_per_second() * weight_gb; }
  // The typical step as well as the average: on a shared VM a few steps stall for tens of
  // milliseconds when a core is taken away, and the mean carries them.
  double bandwidth_at_median_step() const { return itl_p50 > 0 ? weight_gb / itl_p50 : 0; }
};

// One speculative configuration over the same prompts.
struct BenchSpeculative {
  std::string method, draft_shape;
  int k = 0;
  RunTotals totals;
  double speedup = 0;
  int identical = 0;  // outputs equal to the baseline's
  size_t prompts = 0;
  bool batched = false;  // --max-num-seqs > 1: output tok/s of the whole run
};

struct BenchRun {
  int threads = 0;
  int prefill_tokens = 0;
  double prefill_tokens_per_second = 0;
  size_t prompt_tokens = 0;  // of the prompt the costs were measured after
  VerifyCost verify;
  double verify_gflops = 0;  // the matmuls' rate in the verification pass (0: not a dense model)
  std::optional<BenchCostCurve> cost_curve;
  BenchBaseline baseline;
  // --grammar / --json-schema: the same prompts decoded without the constraint in the same run,
  // before and after the constrained baseline (tokens and seconds of both), so the constraint's
  // cost is a ratio.
  std::optional<RunTotals> unconstrained;
  std::optional<BenchSpeculative> speculative;
  std::vector<BenchSpeculative> compared;  // --compare-shapes
};

struct BenchReport {
  BenchHeader header;
  std::vector<BenchRun> runs;
};

void print_header(const BenchHeader& h);
void print_cost_curve(const BenchCostCurve& c);
void print_baseline(const BenchRun& run, const BenchHeader& h);
void print_unconstrained(const BenchRun& run);
void print_speculative(const BenchSpeculative& s);
nlohmann::json bench_json(const BenchReport& r);

}  // namespace eaglet::cli
