// `eaglet demo`: the whole pipeline in a few minutes. Target (-m DIR, else the built-in model)
// -> regeneration -> online draft training -> (small Llama targets: target and draft widened to a
// 1B shape that computes the same function) -> benchmark of plain decoding, n-gram lookup and the
// new EAGLE-3 draft (and, with --dflash-draft, a DFlash draft) on prompts the draft never saw,
// printed as one table and drawn as demo.svg.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "cli/bench_runner.h"
#include "cli/commands.h"
#include "sampling/sampler.h"
#include "core/thread_pool.h"
#include "engine/prompt_dataset.h"
#include "io/mapped_file.h"
#include "train/trainer.h"
#include "convert/widen.h"
#include "io/json_config.h"
#include "core/cpu_features.h"
#include "cli/demo_chart.h"
#include "core/error.h"
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace eaglet::cli {

namespace {
struct DemoOptions {
  CommonOptions common;
  std::string data;
  std::string output = "runs/demo";
  int steps = 600;
  int num_samples = 800;
  int eval_prompts = 12;
  int max_tokens = 64;
  std::string widen = "auto";
  std::string dflash_draft;  // a DFlash draft trained for the same target, benchmarked beside EAGLE-3
};

// Text for the built-in model (or when ../shared is absent): short story openings.
std::string builtin_texts_file(const std::string& dir) {
  const char* subjects[] = {"Lily", "Tom", "The cat", "A little dog", "Sam", "The bird", "Mia", "Ben"};
  const char* verbs[] = {"went to the park", "found a red ball", "wanted to play", "saw a big tree",
                         "ate a cake", "made a new friend", "was very happy", "looked at the sky"};
  const std::string path = dir + "/builtin_texts.txt";
  std::ofstream out(path);
  for (int i = 0; i < 1000; ++i)
    out << subjects[i % 8] << " " << verbs[(i / 8) % 8] << ". " << subjects[(i / 3) % 8] << " " << verbs[(i * 5) % 8]
        << " and then " << verbs[(i * 7 + 1) % 8] << ".\n";
  return path;
}

// Small Llama targets are widened (with the draft just trained) to TinyLlama-1.1B's shape, which
// computes the same function: on a 260K-parameter model a step costs tens of microseconds and
// speculation's own bookkeeping dominates, while a 1B-shaped model is memory-bound like the models
// users serve, which is where drafting pays.
// --widen: none, auto (TinyLlama-1.1B for Llama targets under hidden 1024), tinyllama, or a shape
// "hidden=H,heads=N,kv_heads=N,head_dim=N,intermediate=N,layers=N" (unset keys: TinyLlama's).
std::optional<WidenShape> demo_widen_shape(const DemoOptions& o) {
  if (o.widen == "none" || o.common.model_dir.empty() || !file_exists(o.common.model_dir + "/config.json")) return std::nullopt;
  const JsonConfig c = JsonConfig::load(o.common.model_dir + "/config.json");
  const bool llama = c.has("architectures") && c.raw()["architectures"][0] == "LlamaForCausalLM";
  if (o.widen == "auto") return llama && c.get_size("hidden_size") < 1024 ? std::optional<WidenShape>(WidenShape{}) : std::nullopt;
  if (!llama) fail("--widen {}: {} is not a LlamaForCausalLM", o.widen, o.common.model_dir);
  WidenShape s;
  if (o.widen == "tinyllama") return s;
  std::map<std::string, int*> keys = {{"hidden", &s.hidden},         {"heads", &s.heads},
                                      {"kv_heads", &s.kv_heads},     {"head_dim", &s.head_dim},
                                      {"intermediate", &s.intermediate}, {"layers", &s.layers}};
  std::stringstream ss(o.widen);
  for (std::string kv; std::getline(ss, kv, ',');) {
    const size_t eq = kv.find('=');
    const auto it = keys.find(kv.substr(0, eq));
    if (eq == std::string::npos || it == keys.end())
      fail("--widen: '{}' is not none, auto, tinyllama or key=value with keys hidden, heads, kv_heads, head_dim, "
           "intermediate, layers", kv);
    try {
      *it->second = std::stoi(kv.substr(eq + 1));
    } catch (const std::exception&) {
      fail("--widen: {} needs an integer, got '{}'", it->first, kv.substr(eq + 1));
    }
  }
  return s;
}

TrainConfig demo_train_config(const DemoOptions& o, const std::string& data) {
  TrainConfig cfg = TrainConfig::load("", {});
  cfg.output_dir = o.output;
  cfg.target = o.common.model_dir;
  cfg.data_path = data;
  cfg.num_samples = o.num_samples;
  cfg.eval_samples = o.eval_prompts;
  // The recipe of examples/stories260k/train.yaml, shortened: text regenerated at a low
  // temperature is close to the greedy decoding the draft is judged on (docs/training.md).
  cfg.regen_temperature = 0.3f;
  cfg.regen_samples_per_prompt = 2;
  cfg.regen_max_new_tokens = 120;
  cfg.regen_batch = 16;
  cfg.ttt_steps = 3;
  cfg.steps = o.steps;
  cfg.batch_size = 16;
  cfg.lr = 3e-3;
  cfg.save_every = 100;
  cfg.log_every = 50;
  const ModelConfig mc = load_bundle(o.common.model_dir).model->config();
  const int L = mc.num_layers;
  // On small targets the default taps (2, L/2, L-3) collapse onto one layer: take low, middle
  // and high layers instead (all < L, so vLLM can tap them too).
  if (L >= 4 && (L / 2 == 2 || L - 3 <= L / 2)) cfg.aux_layers = {1, (L + 1) / 2, L - 1};
  // A tiny target's MLP is too narrow for the draft's job (the recipe's 688 against 172).
  if (mc.hidden <= 256) cfg.draft.intermediate = 4 * mc.intermediate;
  cfg.inference_threads = 1;
  cfg.train_threads = 1;
  const int total_threads = ThreadPool::default_threads();
  if (total_threads > 2) cfg.inference_threads = cfg.train_threads = total_threads / 2;
  return cfg;
}

// The trained draft, paired with the target it runs against: the small target as it is, or
// (--widen) both widened to a memory-bound size that computes the same function.
struct DemoPair {
  CommonOptions target;
  std::string draft, dflash;  // dflash: "" without --dflash-draft
};

DemoPair demo_pair(const DemoOptions& o, const TrainSummary& ts, const std::optional<WidenShape>& wide_shape) {
  DemoPair p{o.common, ts.export_dir, o.dflash_draft};
  if (!wide_shape) return p;
  const std::string wt = o.output + "/wide-target", wd = o.output + "/wide-draft";
  spdlog::info("demo: widening target and draft to hidden {}, {} layers (same function) in {}, {}", wide_shape->hidden,
               wide_shape->layers, wt, wd);
  widen_llama(o.common.model_dir, wt, *wide_shape);
  widen_eagle3(ts.export_dir, wt, wd, *wide_shape);
  p.target.model_dir = wt;
  p.draft = wd;
  if (!o.dflash_draft.empty()) {
    p.dflash = o.output + "/wide-dflash";
    widen_dflash(o.dflash_draft, wt, p.dflash, *wide_shape);
  }
  MappedFile::set_read_into_memory(true);  // steadier decode than page-cache mappings (docs/engine.md)
  return p;
}

// Unseen prompts: the opening tokens of the texts the trainer held out.
std::vector<std::vector<int>> demo_prompts(const DemoOptions& o, const std::string& data, const Tokenizer& tok) {
  const auto texts = load_prompts(data, o.num_samples);
  std::vector<std::vector<int>> prompts;
  for (size_t i = texts.size() - size_t(std::min<int>(o.eval_prompts, int(texts.size()))); i < texts.size(); ++i) {
    auto ids = tok.encode(texts[i]);
    ids.resize(std::min<size_t>(ids.size(), 8));
    prompts.push_back(ids);
  }
  return prompts;
}

struct Method {
  const char* name;
  const SpecSetup* spec;
  RunTotals totals;
};

// Each prompt goes through every method before the next prompt, so a swing in this machine's
// memory bandwidth lands on all of them alike.
void run_methods(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts, int max_tokens,
                 std::vector<Method>& methods) {
  const SamplingParams greedy;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (Method& m : methods) {
      RunTotals r = run_prompts(pool, b, {prompts[p]}, max_tokens, greedy, false, m.spec);
      m.totals.tokens += r.tokens;
      m.totals.seconds += r.seconds;
      m.totals.spec.merge(r.spec);
      m.totals.outputs.push_back(r.outputs[0]);
    }
    spdlog::info("demo: prompt {}/{} done", p + 1, prompts.size());
  }
}

// The table, the picture and the JSON report: each method against the target alone.
void report_methods(const DemoOptions& o, const ModelBundle& b, int threads, const TrainSummary& ts,
                    const std::string& draft, size_t num_prompts, const std::vector<Method>& methods) {
  const RunTotals& base = methods[0].totals;
  std::vector<DemoRow> rows;
  nlohmann::json report = {{"model", b.label()},       {"draft", draft},            {"threads", threads},
                           {"prompts", num_prompts},   {"max_tokens", o.max_tokens}, {"machine", cpu_description()},
                           {"training", {{"steps", ts.steps_done}, {"wall_seconds", ts.wall_seconds},
                                         {"eval_simulated_acceptance", ts.eval_simulated_acceptance}}}};
  std::printf("\n== eaglet demo: %s, %zu unseen prompts x %d tokens, greedy, %d thread(s), %s ==\n", b.label().c_str(),
              num_prompts, o.max_tokens, threads, cpu_description().c_str());
  std::printf("training: %lld steps in %.0fs wall, trainer busy %.0f%%, eval simulated acceptance length %.2f\n",
              (long long)ts.steps_done, ts.wall_seconds, 100 * ts.trainer_busy_fraction, ts.eval_simulated_acceptance);
  std::printf("%-24s %10s %12s %10s %10s   %s\n", "method", "tok/s", "accept len", "speedup", "identical", "accepted at position 1..k");
  for (const Method& m : methods) {
    int same = 0;
    for (size_t i = 0; i < num_prompts; ++i) same += m.totals.outputs[i] == base.outputs[i];
    DemoRow row{m.name, m.totals.tokens_per_second(), m.totals.tokens_per_second() / base.tokens_per_second(),
                m.spec ? m.totals.spec.mean_acceptance_length() : 0, m.spec ? m.totals.spec.per_position_rates() : std::vector<double>{}};
    std::string pos;
    for (double r : row.acceptance_by_position) pos += fmt::format("{:.2f} ", r);
    std::printf("%-24s %10.1f %12s %9.2fx %7d/%zu   %s\n", m.name, row.tokens_per_second,
                m.spec ? fmt::format("{:.2f}", row.acceptance_length).c_str() : "-", row.speedup, same, num_prompts, pos.c_str());
    report["methods"].push_back({{"method", row.method}, {"tokens_per_second", row.tokens_per_second}, {"speedup", row.speedup},
                                 {"acceptance_length", row.acceptance_length}, {"acceptance_by_position", row.acceptance_by_position},
                                 {"identical", same},
                                 {"drafted_tokens", m.totals.spec.num_draft_tokens}, {"accepted_tokens", m.totals.spec.num_accepted_tokens}});
    rows.push_back(row);
  }
  const std::string svg = o.output + "/demo.svg", json_path = o.output + "/demo.json";
  write_demo_svg(svg, fmt::format("eaglet demo: {}, {} thread(s), {}", b.label(), threads, cpu_description()), rows);
  std::ofstream(json_path) << report.dump(2) << "\n";
  std::printf("draft: %s\npicture: %s\nreport: %s\n", draft.c_str(), svg.c_str(), json_path.c_str());
}

void run_demo(const DemoOptions& o) {
  apply_common_options(o.common);
  std::filesystem::create_directories(o.output);
  std::string data = o.data;
  const std::string shared_stories = "../shared/data/tinystories/tinystories_train_head_subset.txt";
  if (data.empty()) data = (!o.common.model_dir.empty() && file_exists(shared_stories)) ? shared_stories : builtin_texts_file(o.output);
  spdlog::info("demo: data {}", data);
  const auto wide_shape = demo_widen_shape(o);  // a bad --widen fails before training
  if (!o.dflash_draft.empty() && !file_exists(o.dflash_draft + "/config.json"))
    fail("--dflash-draft {}: no config.json there (a DFlashDraftModel directory)", o.dflash_draft);
  const TrainSummary ts = run_training(demo_train_config(o, data));
  const DemoPair pair = demo_pair(o, ts, wide_shape);
  const auto pool = make_thread_pool(o.common.threads);
  ModelBundle b = load_target(pair.target);
  const std::vector<std::vector<int>> prompts = demo_prompts(o, data, b.tokenizer);
  SpecOptions ng;
  ng.method = "ngram";
  ng.num_speculative_tokens = 3;
  SpecOptions chain;
  chain.draft_dir = pair.draft;
  chain.num_speculative_tokens = 3;
  SpecOptions autoshape = chain;
  autoshape.num_speculative_tokens = -1;
  SpecOptions auto_q8 = autoshape;
  auto_q8.draft_quantize = "q8_0";
  const SpecSetup ngram(ng, *b.model), eagle(chain, *b.model), eagle_auto(autoshape, *b.model),
      eagle_auto_q8(auto_q8, *b.model);
  // Chains of 3 show what the draft learned (acceptance length); auto what the cost model makes
  // of it on this target; the Q8_0 draft what a draft level streaming half the bytes adds.
  std::vector<Method> methods = {{"target only", nullptr, {}},
                                 {"n-gram lookup", &ngram, {}},
                                 {"EAGLE-3, chain of 3", &eagle, {}},
                                 {"EAGLE-3, auto shape", &eagle_auto, {}},
                                 {"EAGLE-3 auto, Q8_0 draft", &eagle_auto_q8, {}}};
  // --dflash-draft: the block draft beside it, as a chain of 7 and under the cost model.
  std::unique_ptr<SpecSetup> dflash_chain, dflash_auto;
  if (!pair.dflash.empty()) {
    SpecOptions df;
    df.method = "dflash";
    df.draft_dir = pair.dflash;
    df.num_speculative_tokens = 7;
    dflash_chain = std::make_unique<SpecSetup>(df, *b.model);
    df.num_speculative_tokens = -1;
    dflash_auto = std::make_unique<SpecSetup>(df, *b.model);
    methods.push_back({"DFlash, chain of 7", dflash_chain.get(), {}});
    methods.push_back({"DFlash, auto shape", dflash_auto.get(), {}});
  }
  run_methods(*pool, b, prompts, o.max_tokens, methods);
  report_methods(o, b, pool->size(), ts, pair.draft, prompts.size(), methods);
}
}  // namespace

void add_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand("demo", "target -> online EAGLE-3 training -> speculative decoding benchmark");
  add_common_options(cmd, &o->common);
  cmd->add_option("--dflash-draft", o->dflash_draft,
                  "a DFlash draft trained for the same target (e.g. examples/stories260k/dflash.yaml's export), "
                  "widened with it and benchmarked beside the EAGLE-3 draft");
  cmd->add_option("--data", o->data, "training texts (default: TinyStories from ../shared with -m, else built-in)");
  cmd->add_option("--output", o->output, "run directory (checkpoints, export)");
  cmd->add_option("--steps", o->steps, "training steps")->check(CLI::PositiveNumber);
  cmd->add_option("--num-samples", o->num_samples, "texts to regenerate and train on")->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per benchmark prompt")->check(CLI::PositiveNumber);
  cmd->add_option("--eval-prompts", o->eval_prompts, "held-out prompts to benchmark on")->check(CLI::PositiveNumber);
  cmd->add_option("--widen", o->widen,
                  "auto (small Llama targets and their draft are benchmarked widened to TinyLlama-1.1B's shape, same "
                  "function) | tinyllama | none | hidden=H,heads=N,kv_heads=N,head_dim=N,intermediate=N,layers=N");
  cmd->callback([o] { run_demo(*o); });
}

}  // namespace eaglet::cli
