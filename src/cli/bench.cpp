// `eaglet bench`: the same prompts decoded with and without speculation, at one or more thread
// counts, next to this machine's memory bandwidth measured in the same run. Reports prefill and
// decode tokens/s, effective weight bandwidth, acceptance metrics and the speedup.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/bench_runner.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/memory_bandwidth.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "engine/prompt_dataset.h"
#include "kernels/isa_table.h"
#include "kernels/pack.h"
#include "speculation/cost_model.h"

namespace eaglet::cli {

namespace {
struct BenchOptions {
  CommonOptions common;
  SpecOptions spec;
  std::string dataset;
  int num_prompts = 8;
  int max_tokens = 128;
  int prefill_tokens = 128;
  int verify_reps = 5;
  SamplingParams sampling;
  std::vector<int> thread_counts;
  bool skip_bandwidth = false;
  bool ignore_eos = false;
  std::string json_out;
  std::vector<std::string> compare_shapes;  // more draft shapes run in the same run ("k=N" or --draft-shape)
  bool cost_curve = false;
};

const std::vector<std::string> kDefaultPrompts = {
    "Once upon a time", "One day, a little girl named Lily", "Tom and his dog went to the park",
    "The sun was shining and", "There was a big red ball", "Sam wanted to play with his friend",
    "In a small house lived a cat", "Mom said, \"Let's go"};

double prefill_rate(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts, int n) {
  std::vector<int> ids;
  while (int(ids.size()) < n)
    for (auto& p : prompts)
      for (int t : p)
        if (int(ids.size()) < n) ids.push_back(t);
  n = std::min<int>(n, b.model->config().max_position - 1);
  ids.resize(size_t(n));
  KvCache cache(b.model->kv_shape(kv_blocks_for(n)));
  const SeqId s = cache.create();
  const auto t0 = std::chrono::steady_clock::now();
  prefill(pool, *b.model, cache, s, ids, 512);
  return n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The kernel each of the model's matrices runs on, counted by name ("amx bf16": 155), and the
// multiply-adds of one token when every matrix is read each token (0 for MoE, which is not).
struct KernelUse {
  nlohmann::json counts = nlohmann::json::object();
  std::string text;
  double dense_macs_per_token = 0;
};

KernelUse kernel_use(const Model& m) {
  KernelUse u;
  std::map<std::string, int> n;
  size_t bytes = 0;
  for (const kernels::WeightView* w : m.matrices()) {
    ++n[kernels::kernel_name(*w, kernels::active_table())];
    u.dense_macs_per_token += double(w->rows) * double(w->cols);
    bytes += w->nbytes();
  }
  if (bytes != m.weight_bytes_per_token()) u.dense_macs_per_token = 0;
  for (auto& [name, count] : n) {
    u.counts[name] = count;
    u.text += (u.text.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  }
  return u;
}

// The prompts, encoded; over-long ones keep their head, leaving room for the generation and one
// step's draft.
std::vector<std::vector<int>> bench_prompts(const BenchOptions& o, ModelBundle& b, const SpecSetup& spec) {
  std::vector<std::string> texts = o.dataset.empty() ? kDefaultPrompts : load_prompts(o.dataset, o.num_prompts);
  if (int(texts.size()) > o.num_prompts) texts.resize(size_t(o.num_prompts));
  std::vector<std::vector<int>> prompts;
  const int max_prompt = b.model->config().max_position - o.max_tokens - spec.max_step_tokens() - 2;
  EAGLET_CHECK(max_prompt > 0, "--max-tokens {} leaves no room for a prompt in the context of {}", o.max_tokens,
               b.model->config().max_position);
  for (auto& t : texts) {
    auto ids = b.tokenizer.encode(t);
    if (int(ids.size()) > max_prompt) ids.resize(size_t(max_prompt));
    prompts.push_back(ids);
  }
  return prompts;
}

// What ran where: model, kernels, CPU and AMX; printed, and the report's top level.
nlohmann::json bench_header(const BenchOptions& o, ModelBundle& b, const SpecSetup& spec, size_t num_prompts,
                            const KernelUse& use) {
  const double active_gb = double(b.model->weight_bytes_per_token()) / 1e9;
  std::printf("model: %s | kernels: %s | prompts: %zu (%s) | max tokens: %d | temperature: %.2f\n", b.label().c_str(),
              kernels::active_table().name, num_prompts, o.dataset.empty() ? "built-in" : o.dataset.c_str(), o.max_tokens,
              o.sampling.temperature);
  std::printf("speculation: %s | active-parameter weights per token: %.3f GB\n", spec.describe().c_str(), active_gb);
  std::string amx_why;
  const bool amx = request_amx(&amx_why);
  if (amx) amx_why = std::string("granted, kernels ") + (kernels::amx_table().isa == Isa::Amx ? "on" : "off (see the log)");
  std::printf("cpu: %s | features: %s | amx: %s\nmatmul kernels: %s\n", cpu_description().c_str(),
              cpu_features().names().c_str(), amx_why.c_str(), use.text.c_str());
  return {{"model", b.label()},
          {"kernels", kernels::active_table().name},
          {"matmul_kernels", use.counts},
          {"cpu", cpu_description()},
          {"cpu_features", cpu_features().names()},
          {"amx", amx_why},
          {"dataset", o.dataset.empty() ? "built-in" : o.dataset},
          {"num_prompts", num_prompts},
          {"max_tokens", o.max_tokens},
          {"temperature", o.sampling.temperature},
          {"active_weight_gb_per_token", active_gb},
          {"runs", nlohmann::json::array()}};
}

nlohmann::json pass_json(const PassCost& p) {
  return nlohmann::json{{"seconds", p.seconds}, {"weight_gb", p.weight_gb}, {"experts_touched", p.experts_touched}};
}

// --cost-curve: c(n)/c(1) of the target forward as the cost model measures it, and a 16-node
// token tree's verification against one decode step.
void bench_cost_curve(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int reps, nlohmann::json& run) {
  const CostModel cm = CostModel::measure(pool, *b.model, reps);
  nlohmann::json curve = nlohmann::json::array();
  std::printf("  forward cost c(n)/c(1):");
  for (auto& [n, sec] : cm.points()) {
    curve.push_back({{"tokens", n}, {"seconds", sec}, {"ratio", sec / cm.target_seconds(1)}});
    std::printf(" %d:%.2f", n, sec / cm.target_seconds(1));
  }
  run["cost_curve"] = curve;
  if (!b.model->supports_token_trees()) {
    std::printf("\n  (no tree verification: %s verifies chains only)\n", b.model->config().architecture.c_str());
    return;
  }
  const VerifyCost tree = measure_tree_verify_cost(pool, b, prompt, reps);
  std::printf("\n  16-node tree verification (topk 4, depth 2): %.2f ms = %.2fx one step\n", tree.verify.seconds * 1e3,
              tree.ratio());
  run["tree_verify_cost"] = {{"tree_tokens", tree.verify_tokens}, {"step", pass_json(tree.step)},
                             {"verify", pass_json(tree.verify)}, {"ratio", tree.ratio()}};
}

// Plain decoding of every prompt with bandwidth probes around each, beside the step, verification
// and prefill figures measured before it; printed and stored in `run`. Its outputs are what
// speculation must reproduce.
RunTotals bench_baseline(ThreadPool& pool, ModelBundle& b, const BenchOptions& o,
                         const std::vector<std::vector<int>>& prompts, double prefill, const VerifyCost& vc,
                         const KernelUse& use, nlohmann::json& run) {
  const double active_gb = double(b.model->weight_bytes_per_token()) / 1e9, weight_gb = vc.step.weight_gb;
  const ProbedBaseline probed =
      run_baseline_with_probes(pool, b, prompts, o.max_tokens, o.sampling, o.ignore_eos, !o.skip_bandwidth);
  const RunTotals& base = probed.totals;
  const double eff = base.tokens_per_second() * weight_gb;
  // The typical step as well as the average: on a shared VM a few steps stall for tens of
  // milliseconds when a core is taken away, and the mean carries them.
  const double itl_p50 = percentile(base.inter_token_seconds, 0.5);
  const double itl_p90 = percentile(base.inter_token_seconds, 0.9);
  const double itl_p99 = percentile(base.inter_token_seconds, 0.99);
  const double eff_p50 = itl_p50 > 0 ? weight_gb / itl_p50 : 0;
  run["baseline"] = {{"decode_tokens", base.tokens},
                     {"decode_seconds", base.seconds},
                     {"decode_tokens_per_second", base.tokens_per_second()},
                     {"weight_gb_per_token", weight_gb},
                     {"effective_bandwidth_gbps", eff},
                     {"itl_p50_s", itl_p50},
                     {"itl_p90_s", itl_p90},
                     {"itl_p99_s", itl_p99},
                     {"effective_bandwidth_at_median_step_gbps", eff_p50}};
  std::printf("\n[threads %d]\n", pool.size());
  const MemoryBandwidth& bw = probed.best;
  if (!o.skip_bandwidth) {
    nlohmann::json probes = nlohmann::json::array();
    for (const MemoryBandwidth& p : probed.probes) probes.push_back({{"read", p.read_gbps}, {"copy", p.copy_gbps}});
    run["memory_bandwidth_gbps"] = {{"read", bw.read_gbps}, {"copy", bw.copy_gbps},
                                    {"nearby_read", probed.nearby.read_gbps}, {"nearby_copy", probed.nearby.copy_gbps},
                                    {"probes", probes}};
    run["baseline"]["fraction_of_read_bandwidth"] = eff / bw.read_gbps;
    run["baseline"]["fraction_of_copy_bandwidth"] = eff / bw.copy_gbps;
    run["baseline"]["fraction_of_read_bandwidth_at_median_step"] = eff_p50 / bw.read_gbps;
    run["baseline"]["fraction_of_copy_bandwidth_at_median_step"] = eff_p50 / bw.copy_gbps;
    run["baseline"]["fraction_of_nearby_read_bandwidth"] = eff / probed.nearby.read_gbps;
    run["baseline"]["fraction_of_nearby_copy_bandwidth"] = eff / probed.nearby.copy_gbps;
    std::printf("  memory bandwidth (same run, best of %zu probes: before the decode and after each prompt): read %.1f GB/s, copy %.1f GB/s\n",
                probed.probes.size(), bw.read_gbps, bw.copy_gbps);
  }
  std::printf("  prefill  : %7.1f tok/s (%d tokens)\n", prefill, o.prefill_tokens);
  std::printf("  one step : %7.2f ms, reads %.3f GB (active parameters %.3f GB)", vc.step.seconds * 1e3,
              vc.step.weight_gb, active_gb);
  if (vc.step.experts_touched) std::printf(", %lld experts", (long long)vc.step.experts_touched);
  std::printf("\n  %d-token verification: %7.2f ms = %.2fx one step, reads %.3f GB", vc.verify_tokens,
              vc.verify.seconds * 1e3, vc.ratio(), vc.verify.weight_gb);
  if (use.dense_macs_per_token > 0) {  // the matmuls' arithmetic rate in the verification pass
    const double gflops = 2 * use.dense_macs_per_token * vc.verify_tokens / vc.verify.seconds / 1e9;
    std::printf(", %.1f GFLOP/s", gflops);
    run["verify_cost"]["gflops"] = gflops;
  }
  if (vc.verify.experts_touched)
    std::printf(", %lld experts (union over its tokens, summed over layers)", (long long)vc.verify.experts_touched);
  std::printf("\n");
  std::printf("  baseline : %7.2f tok/s decode, %lld tokens, weights %.1f GB/s", base.tokens_per_second(),
              (long long)base.tokens, eff);
  if (!o.skip_bandwidth)
    std::printf(" (%.0f%% of read, %.0f%% of copy bandwidth; %.0f%% / %.0f%% of the probes around each prompt)",
                100 * eff / bw.read_gbps, 100 * eff / bw.copy_gbps, 100 * eff / probed.nearby.read_gbps,
                100 * eff / probed.nearby.copy_gbps);
  std::printf("\n  inter-token latency: median %.2f ms, p90 %.2f ms, p99 %.2f ms; at the median step weights %.1f GB/s",
              1e3 * itl_p50, 1e3 * itl_p90, 1e3 * itl_p99, eff_p50);
  if (!o.skip_bandwidth)
    std::printf(" (%.0f%% of read, %.0f%% of copy bandwidth)", 100 * eff_p50 / bw.read_gbps, 100 * eff_p50 / bw.copy_gbps);
  std::printf("\n");
  return base;
}

// One speculative configuration over the same prompts: speed, acceptance, and whether every
// output equals the baseline's.
nlohmann::json bench_speculative(ThreadPool& pool, ModelBundle& b, const BenchOptions& o,
                                 const std::vector<std::vector<int>>& prompts, const RunTotals& base,
                                 const SpecSetup& setup) {
  RunTotals sp = run_prompts(pool, b, prompts, o.max_tokens, o.sampling, o.ignore_eos, &setup);
  int identical = 0;
  for (size_t i = 0; i < prompts.size(); ++i) identical += sp.outputs[i] == base.outputs[i];
  const double speedup = base.tokens_per_second() > 0 ? sp.tokens_per_second() / base.tokens_per_second() : 0;
  std::printf("  %s\n    %7.2f tok/s decode, %lld tokens, speedup %.2fx, outputs identical to baseline: %d/%zu\n",
              setup.describe().c_str(), sp.tokens_per_second(), (long long)sp.tokens, speedup, identical,
              prompts.size());
  std::printf("    %s\n", sp.spec.summary().c_str());
  std::printf("    time split: target %.2fs, draft %.2fs, verify %.2fs\n", sp.spec.target_seconds,
              sp.spec.draft_seconds, sp.spec.verify_seconds);
  return nlohmann::json{{"method", setup.method()},
                        {"draft_shape", setup.describe()},
                        {"num_speculative_tokens", setup.k()},
                        {"decode_tokens", sp.tokens},
                        {"decode_seconds", sp.seconds},
                        {"decode_tokens_per_second", sp.tokens_per_second()},
                        {"speedup", speedup},
                        {"outputs_identical_to_baseline", identical},
                        {"spec_decode", spec_json(sp.spec)}};
}

void run_bench(BenchOptions o) {
  apply_common_options(o.common);
  ModelBundle b = load_target(o.common);
  SpecSetup spec(o.spec, *b.model);
  const std::vector<std::vector<int>> prompts = bench_prompts(o, b, spec);
  if (o.thread_counts.empty()) o.thread_counts = {o.common.threads > 0 ? o.common.threads : ThreadPool::default_threads()};
  const KernelUse use = kernel_use(*b.model);
  nlohmann::json report = bench_header(o, b, spec, prompts.size(), use);
  for (int threads : o.thread_counts) {
    ThreadPool pool(threads);
    nlohmann::json run = {{"threads", threads}};
    const double prefill = prefill_rate(pool, b, prompts, o.prefill_tokens);
    run["prefill"] = {{"tokens", o.prefill_tokens}, {"tokens_per_second", prefill}};
    // What one decode step really reads (MoE: only the routed experts) and what a k+1-token
    // verification pass costs relative to it.
    const VerifyCost vc = measure_verify_cost(pool, b, prompts[0], std::max(1, spec.k()) + 1, o.verify_reps);
    run["verify_cost"] = {{"prompt_tokens", prompts[0].size()}, {"verify_tokens", vc.verify_tokens},
                          {"step", pass_json(vc.step)}, {"verify", pass_json(vc.verify)}, {"ratio", vc.ratio()}};
    if (o.cost_curve) bench_cost_curve(pool, b, prompts[0], o.verify_reps, run);
    const RunTotals base = bench_baseline(pool, b, o, prompts, prefill, vc, use, run);
    if (spec.enabled()) run["speculative"] = bench_speculative(pool, b, o, prompts, base, spec);
    for (const std::string& shape : o.compare_shapes) {
      SpecOptions so = o.spec;
      if (shape.rfind("k=", 0) == 0) {
        so.num_speculative_tokens = std::stoi(shape.substr(2));
        so.draft_shape = "";
      } else {
        so.draft_shape = shape;
      }
      const SpecSetup other(so, *b.model);
      run["speculative_compared"].push_back(bench_speculative(pool, b, o, prompts, base, other));
    }
    report["runs"].push_back(run);
  }
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out);
    if (!out) fail("{}: cannot write", o.json_out);
    out << report.dump(2) << "\n";
    spdlog::info("wrote {}", o.json_out);
  }
}
}  // namespace

void add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "benchmark prefill/decode speed, with and without speculation");
  add_common_options(cmd, &o->common);
  add_spec_options(cmd, &o->spec);
  cmd->add_option("--dataset", o->dataset, "prompts: .txt, .jsonl or .json (default: built-in story prompts)");
  cmd->add_option("--num-prompts", o->num_prompts, "prompts to run")->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", o->max_tokens, "tokens to generate per prompt")->check(CLI::PositiveNumber);
  cmd->add_option("--prefill-tokens", o->prefill_tokens, "prompt length of the prefill measurement")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", o->sampling.temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", o->sampling.top_p)->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", o->sampling.top_k)->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->sampling.seed);
  cmd->add_option("--thread-counts", o->thread_counts, "run at each of these thread counts (e.g. 1,2)")
      ->delimiter(',');
  cmd->add_option("--verify-reps", o->verify_reps, "passes timed for the step / verification cost (their median is reported)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "always generate --max-tokens tokens");
  cmd->add_flag("--skip-bandwidth", o->skip_bandwidth, "skip the memory bandwidth measurement");
  cmd->add_option("--json", o->json_out, "write the report as JSON to this file");
  cmd->add_option("--compare-shapes", o->compare_shapes,
                  "more draft shapes measured in the same run: k=N (chain) or a --draft-shape value");
  cmd->add_flag("--cost-curve", o->cost_curve, "report the forward cost c(n)/c(1), n = 1..64, and a 16-node tree's");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace eaglet::cli
