// `eaglet bench`: the same prompts decoded with and without speculation, at one or more thread
// counts, next to this machine's memory bandwidth measured in the same run. Reports prefill and
// decode tokens/s, effective weight bandwidth, acceptance metrics and the speedup.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/bench_report.h"
#include "cli/bench_runner.h"
#include "cli/commands.h"
#include "constrain/json_schema.h"
#include "cli/report.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/memory_bandwidth.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "engine/prompt_dataset.h"
#include "io/mapped_file.h"
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
  std::vector<std::string> compare_shapes;   // more draft shapes run in the same run ("k=N" or --draft-shape)
  std::vector<std::string> compare_configs;  // more methods / drafts: vLLM --speculative-config JSON each
  bool cost_curve = false;
  int max_num_seqs = 1;  // > 1: the prompts run that many at a time (run_prompts_batched)
  std::string grammar_file, json_schema_file;  // structured output: every prompt under this constraint
};

// --grammar FILE (GBNF) / --json-schema FILE (llama.cpp's spellings) onto `sampling`.
void apply_constraint(const BenchOptions& o, const Tokenizer& tok, SamplingParams* sampling) {
  if (o.grammar_file.empty() && o.json_schema_file.empty()) return;
  EAGLET_CHECK(o.grammar_file.empty() || o.json_schema_file.empty(), "give one of --grammar and --json-schema");
  const std::string& file = o.grammar_file.empty() ? o.json_schema_file : o.grammar_file;
  const std::string text = read_text_file(file);
  std::string gbnf = text;
  if (!o.json_schema_file.empty()) {
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
    EAGLET_CHECK(!schema.is_discarded(), "--json-schema {}: not JSON", file);
    try {
      gbnf = constrain::json_schema_to_gbnf(schema);
    } catch (const Error& e) {
      fail("--json-schema {}: {}", file, e.what());
    }
  }
  sampling->grammar = constrain::Grammar::parse(gbnf, file);
  sampling->vocabulary = std::make_shared<constrain::TokenTrie>(tok);
}

const std::vector<std::string> kDefaultPrompts = {
    "Once upon a time", "One day, a little girl named Lily", "Tom and his dog went to the park",
    "The sun was shining and", "There was a big red ball", "Sam wanted to play with his friend",
    "In a small house lived a cat", "Mom said, \"Let's go"};

// The prompts through the engine as --max-num-seqs says: one at a time (decode tok/s) or batched
// (output tok/s over the whole run).
RunTotals run_all_prompts(ThreadPool& pool, ModelBundle& b, const BenchOptions& o, const std::vector<std::vector<int>>& prompts,
                          const SamplingParams& sampling, const SpecSetup* spec) {
  if (o.max_num_seqs > 1)
    return run_prompts_batched(pool, b, prompts, o.max_tokens, sampling, o.ignore_eos, spec, o.max_num_seqs);
  return run_prompts(pool, b, prompts, o.max_tokens, sampling, o.ignore_eos, spec);
}

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
  std::map<std::string, int> counts;
  double dense_macs_per_token = 0;
};

// Kernel name -> how many of `matrices` run on it.
std::map<std::string, int> kernel_counts(const std::vector<const kernels::WeightView*>& matrices) {
  std::map<std::string, int> counts;
  for (const kernels::WeightView* w : matrices) ++counts[kernels::kernel_name(*w, kernels::active_table())];
  return counts;
}

KernelUse kernel_use(const Model& m) {
  KernelUse u;
  size_t bytes = 0;
  const std::vector<const kernels::WeightView*> matrices = m.matrices();
  u.counts = kernel_counts(matrices);
  for (const kernels::WeightView* w : matrices) {
    u.dense_macs_per_token += double(w->rows) * double(w->cols);
    bytes += w->nbytes();
  }
  if (bytes != m.weight_bytes_per_token()) u.dense_macs_per_token = 0;
  return u;
}

// The prompts, encoded; over-long ones keep their head, leaving room for the generation and one
// step's draft.
std::vector<std::vector<int>> bench_prompts(const BenchOptions& o, ModelBundle& b, int max_step_tokens) {
  std::vector<std::string> texts = o.dataset.empty() ? kDefaultPrompts : load_prompts(o.dataset, o.num_prompts);
  if (int(texts.size()) > o.num_prompts) texts.resize(size_t(o.num_prompts));
  std::vector<std::vector<int>> prompts;
  const int max_prompt = b.model->config().max_position - o.max_tokens - max_step_tokens - 2;
  EAGLET_CHECK(max_prompt > 0, "--max-tokens {} leaves no room for a prompt in the context of {}", o.max_tokens,
               b.model->config().max_position);
  for (auto& t : texts) {
    auto ids = b.tokenizer.encode(t);
    if (int(ids.size()) > max_prompt) ids.resize(size_t(max_prompt));
    prompts.push_back(ids);
  }
  return prompts;
}

// What runs where: model, kernels, CPU and AMX.
BenchHeader bench_header(const BenchOptions& o, ModelBundle& b, const SpecSetup& spec, size_t num_prompts,
                         const KernelUse& use) {
  BenchHeader h;
  h.model = b.label();
  h.kernels = kernels::active_table().name;
  h.matmul_kernels.assign(use.counts.begin(), use.counts.end());
  if (spec.served_draft()) {
    const auto draft = kernel_counts(spec.served_draft()->matrices());
    h.draft_matmul_kernels.assign(draft.begin(), draft.end());
  }
  h.cpu = cpu_description();
  h.cpu_features = cpu_features().names();
  const bool amx = request_amx(&h.amx);
  if (amx) h.amx = std::string("granted, kernels ") + (kernels::amx_table().isa == Isa::Amx ? "on" : "off (see the log)");
  h.dataset = o.dataset.empty() ? "built-in" : o.dataset;
  h.speculation = spec.describe();
  h.num_prompts = num_prompts;
  h.max_tokens = o.max_tokens;
  h.temperature = o.sampling.temperature;
  h.active_weight_gb = double(b.model->weight_bytes_per_token()) / 1e9;
  return h;
}

// --cost-curve: c(n)/c(1) of the target forward as the cost model measures it, and a 16-node
// token tree's verification against one decode step.
BenchCostCurve bench_cost_curve(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int reps) {
  const CostModel cm = CostModel::measure(pool, *b.model, reps);
  BenchCostCurve c;
  c.seconds.assign(cm.points().begin(), cm.points().end());
  if (!b.model->supports_token_trees()) c.chains_only = b.model->config().architecture;
  else c.tree = measure_tree_verify_cost(pool, b, prompt, reps);
  return c;
}

// Plain decoding of every prompt with bandwidth probes around each. Its outputs are what
// speculation must reproduce.
BenchBaseline bench_baseline(ThreadPool& pool, ModelBundle& b, const BenchOptions& o,
                             const std::vector<std::vector<int>>& prompts, double weight_gb) {
  BenchBaseline base;
  base.max_num_seqs = o.max_num_seqs;
  if (o.max_num_seqs > 1) {  // batched: steps are not single-token decodes, so no bandwidth share
    base.run.totals = run_all_prompts(pool, b, o, prompts, o.sampling, nullptr);
    base.weight_gb = weight_gb;
    return base;
  }
  base.run = run_baseline_with_probes(pool, b, prompts, o.max_tokens, o.sampling, o.ignore_eos, !o.skip_bandwidth);
  base.probed = !o.skip_bandwidth;
  base.weight_gb = weight_gb;
  base.itl_p50 = percentile(base.totals().inter_token_seconds, 0.5);
  base.itl_p90 = percentile(base.totals().inter_token_seconds, 0.9);
  base.itl_p99 = percentile(base.totals().inter_token_seconds, 0.99);
  return base;
}

// One speculative configuration over the same prompts: speed, acceptance, and whether every
// output equals the baseline's.
BenchSpeculative bench_speculative(ThreadPool& pool, ModelBundle& b, const BenchOptions& o,
                                   const std::vector<std::vector<int>>& prompts, const RunTotals& base,
                                   const SpecSetup& setup) {
  BenchSpeculative s;
  s.method = setup.method();
  s.draft_shape = setup.describe();
  s.k = setup.k();
  s.totals = run_all_prompts(pool, b, o, prompts, o.sampling, &setup);
  s.prompts = prompts.size();
  s.batched = o.max_num_seqs > 1;
  for (size_t i = 0; i < prompts.size(); ++i) s.identical += s.totals.outputs[i] == base.outputs[i];
  s.speedup = base.tokens_per_second() > 0 ? s.totals.tokens_per_second() / base.tokens_per_second() : 0;
  print_speculative(s);
  return s;
}

// The configurations measured beside the main one, each against the same baseline:
// --compare-shapes ("k=N", a chain of N, or a --draft-shape value) with the main method and draft,
// then --compare-config (vLLM's --speculative-config JSON over the main options: another method,
// draft or k, e.g. a DFlash draft beside an EAGLE-3 one).
std::vector<std::unique_ptr<SpecSetup>> compared_setups(const BenchOptions& o, const Model& model) {
  std::vector<std::unique_ptr<SpecSetup>> out;
  for (const std::string& shape : o.compare_shapes) {
    SpecOptions so = o.spec;
    if (shape.rfind("k=", 0) == 0) {
      so.num_speculative_tokens = std::stoi(shape.substr(2));
      so.draft_shape = "";
    } else {
      so.draft_shape = shape;
    }
    out.push_back(std::make_unique<SpecSetup>(so, model));
  }
  for (const std::string& config : o.compare_configs) {
    SpecOptions so = o.spec;
    apply_speculative_config(so, config, "--compare-config");
    out.push_back(std::make_unique<SpecSetup>(so, model));
  }
  return out;
}

// Everything at one thread count, printed as it is measured.
BenchRun bench_run(int threads, ModelBundle& b, const BenchOptions& o, const std::vector<std::vector<int>>& prompts,
                   const SpecSetup& spec, const std::vector<std::unique_ptr<SpecSetup>>& compared, const KernelUse& use,
                   const BenchHeader& header) {
  ThreadPool pool(threads);
  BenchRun run;
  run.threads = threads;
  run.prefill_tokens = o.prefill_tokens;
  run.prefill_tokens_per_second = prefill_rate(pool, b, prompts, o.prefill_tokens);
  // What one decode step really reads (MoE: only the routed experts) and what a k+1-token
  // verification pass costs relative to it.
  run.prompt_tokens = prompts[0].size();
  run.verify = measure_verify_cost(pool, b, prompts[0], std::max(1, spec.k()) + 1, o.verify_reps);
  if (use.dense_macs_per_token > 0)
    run.verify_gflops = 2 * use.dense_macs_per_token * run.verify.verify_tokens / run.verify.verify.seconds / 1e9;
  if (o.cost_curve) {
    run.cost_curve = bench_cost_curve(pool, b, prompts[0], o.verify_reps);
    print_cost_curve(*run.cost_curve);
  }
  // --grammar / --json-schema: the prompts without the constraint, once before the constrained
  // baseline and once after it, so a drift of the machine's speed during the run cancels out.
  SamplingParams free = o.sampling;
  free.grammar = nullptr;
  free.vocabulary = nullptr;
  std::optional<RunTotals> before;
  if (o.sampling.grammar) before = run_all_prompts(pool, b, o, prompts, free, nullptr);
  run.baseline = bench_baseline(pool, b, o, prompts, run.verify.step.weight_gb);
  print_baseline(run, header);
  if (before) {
    run.unconstrained = run_all_prompts(pool, b, o, prompts, free, nullptr);
    run.unconstrained->tokens += before->tokens;
    run.unconstrained->seconds += before->seconds;
    print_unconstrained(run);
  }
  const RunTotals& base = run.baseline.totals();
  if (spec.enabled()) run.speculative = bench_speculative(pool, b, o, prompts, base, spec);
  for (const auto& setup : compared) run.compared.push_back(bench_speculative(pool, b, o, prompts, base, *setup));
  return run;
}

void run_bench(BenchOptions o) {
  apply_common_options(o.common);
  ModelBundle b = load_target(o.common);
  apply_constraint(o, b.tokenizer, &o.sampling);
  SpecSetup spec(o.spec, *b.model);
  const std::vector<std::unique_ptr<SpecSetup>> compared = compared_setups(o, *b.model);
  int max_step_tokens = spec.max_step_tokens();
  for (const auto& c : compared) max_step_tokens = std::max(max_step_tokens, c->max_step_tokens());
  const std::vector<std::vector<int>> prompts = bench_prompts(o, b, max_step_tokens);
  if (o.thread_counts.empty()) o.thread_counts = {o.common.threads > 0 ? o.common.threads : ThreadPool::default_threads()};
  // The report's file is made (folders too) before anything is measured: a bad path fails now,
  // not after the whole run.
  std::ofstream json_file;
  if (!o.json_out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(o.json_out).parent_path(), ec);
    json_file.open(o.json_out);
    if (!json_file) fail("--json {}: cannot write{}", o.json_out, ec ? " (" + ec.message() + ")" : "");
  }
  const KernelUse use = kernel_use(*b.model);
  BenchReport report;
  report.header = bench_header(o, b, spec, prompts.size(), use);
  print_header(report.header);
  for (int threads : o.thread_counts) report.runs.push_back(bench_run(threads, b, o, prompts, spec, compared, use, report.header));
  if (!o.json_out.empty()) {
    json_file << bench_json(report).dump(2) << "\n";
    if (!json_file.flush()) fail("--json {}: cannot write", o.json_out);
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
  cmd->add_option("--compare-config", o->compare_configs,
                  "another method or draft measured in the same run, as vLLM's --speculative-config JSON over these "
                  "options, e.g. '{\"method\":\"dflash\",\"model\":\"DIR\",\"num_speculative_tokens\":15}' (repeatable)");
  cmd->add_option("--grammar", o->grammar_file, "structured output: every output a sentence of this GBNF grammar (file)");
  cmd->add_option("--json-schema", o->json_schema_file, "structured output: every output a JSON document valid against this schema (file)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs,
                  "run the prompts this many at a time in one batch, as a server at this concurrency (vLLM's bench "
                  "throughput): output tok/s over the whole run, prefill included (default 1: one prompt at a time, decode tok/s)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--cost-curve", o->cost_curve, "report the forward cost c(n)/c(1), n = 1..64, and a 16-node tree's");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace eaglet::cli
