// `eaglet demo`: the whole pipeline in a few minutes. Target (-m DIR, else the built-in model)
// -> regeneration -> online draft training -> benchmark of plain decoding, n-gram lookup and the
// new EAGLE-3 draft on prompts the draft never saw, printed as one table.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/bench_runner.h"
#include "cli/commands.h"
#include "engine/sampler.h"
#include "core/thread_pool.h"
#include "engine/prompt_dataset.h"
#include "io/mapped_file.h"
#include "train/trainer.h"

namespace eaglet::cli {

namespace {
struct DemoOptions {
  CommonOptions common;
  std::string data;
  std::string output = "runs/demo";
  int steps = 600;
  int num_samples = 600;
  int eval_prompts = 16;
  int max_tokens = 96;
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

void run_demo(const DemoOptions& o) {
  apply_common_options(o.common);
  std::filesystem::create_directories(o.output);
  std::string data = o.data;
  const std::string shared_stories = "../shared/data/tinystories/tinystories_train_head_subset.txt";
  if (data.empty()) data = (!o.common.model_dir.empty() && file_exists(shared_stories)) ? shared_stories : builtin_texts_file(o.output);
  spdlog::info("demo: data {}", data);

  TrainConfig cfg = TrainConfig::load("", {});
  cfg.output_dir = o.output;
  cfg.target = o.common.model_dir;
  cfg.data_path = data;
  cfg.num_samples = o.num_samples;
  cfg.eval_samples = o.eval_prompts;
  cfg.regen_max_new_tokens = 96;
  cfg.regen_batch = 8;
  cfg.ttt_steps = 3;
  cfg.steps = o.steps;
  cfg.batch_size = 8;
  cfg.lr = 3e-3;
  cfg.save_every = 100;
  cfg.log_every = 25;
  {
    // On small targets the default taps (2, L/2, L-3) collapse onto one layer: take low, middle
    // and high layers instead (all < L, so vLLM can tap them too).
    const int L = load_bundle(o.common.model_dir).model->config().num_layers;
    if (L >= 4 && (L / 2 == 2 || L - 3 <= L / 2)) cfg.aux_layers = {1, (L + 1) / 2, L - 1};
  }
  cfg.inference_threads = 1;
  cfg.train_threads = 1;
  const int total_threads = ThreadPool::default_threads();
  if (total_threads > 2) cfg.inference_threads = cfg.train_threads = total_threads / 2;
  TrainSummary ts = run_training(cfg);

  // Unseen prompts: the first tokens of the held-out texts.
  const auto pool = make_thread_pool(o.common.threads);
  ModelBundle b = load_target(o.common);
  auto texts = load_prompts(data, o.num_samples);
  std::vector<std::vector<int>> prompts;
  for (size_t i = texts.size() - size_t(o.eval_prompts); i < texts.size(); ++i) {
    auto ids = b.tokenizer.encode(texts[i]);
    ids.resize(std::min<size_t>(ids.size(), 8));
    prompts.push_back(ids);
  }
  SamplingParams greedy;
  RunTotals base = run_prompts(*pool, b, prompts, o.max_tokens, greedy, false, nullptr);
  // Chains of 3 show what the draft learned (acceptance length); auto shows what the cost model
  // makes of it on this target (on a 260K-parameter model every drafted token costs a full step).
  SpecOptions ng;
  ng.method = "ngram";
  ng.num_speculative_tokens = 3;
  SpecSetup ngram(ng, *b.model);
  RunTotals ngr = run_prompts(*pool, b, prompts, o.max_tokens, greedy, false, &ngram);
  SpecOptions eo;
  eo.draft_dir = ts.export_dir;
  eo.num_speculative_tokens = 3;
  SpecSetup eagle(eo, *b.model);
  RunTotals eag = run_prompts(*pool, b, prompts, o.max_tokens, greedy, false, &eagle);
  eo.num_speculative_tokens = -1;
  SpecSetup eagle_auto(eo, *b.model);
  RunTotals eau = run_prompts(*pool, b, prompts, o.max_tokens, greedy, false, &eagle_auto);
  auto same = [&](const RunTotals& r) {
    int n = 0;
    for (size_t i = 0; i < prompts.size(); ++i) n += r.outputs[i] == base.outputs[i];
    return n;
  };
  std::printf("\n== eaglet demo: %s, %zu unseen prompts, %d tokens, greedy, chains of 3 and auto, %d thread(s) ==\n", b.label().c_str(),
              prompts.size(), o.max_tokens, pool->size());
  std::printf("training: %lld steps in %.0fs wall, trainer busy %.0f%%, eval simulated acceptance length %.2f\n",
              (long long)ts.steps_done, ts.wall_seconds, 100 * ts.trainer_busy_fraction, ts.eval_simulated_acceptance);
  std::printf("%-22s %10s %12s %10s %10s\n", "method", "tok/s", "accept len", "speedup", "identical");
  std::printf("%-22s %10.1f %12s %10s %7zu/%zu\n", "target only", base.tokens_per_second(), "-", "1.00x", prompts.size(),
              prompts.size());
  std::printf("%-22s %10.1f %12.2f %9.2fx %7d/%zu\n", "n-gram lookup", ngr.tokens_per_second(),
              ngr.spec.mean_acceptance_length(), ngr.tokens_per_second() / base.tokens_per_second(), same(ngr), prompts.size());
  std::printf("%-22s %10.1f %12.2f %9.2fx %7d/%zu\n", "EAGLE-3 (trained now)", eag.tokens_per_second(),
              eag.spec.mean_acceptance_length(), eag.tokens_per_second() / base.tokens_per_second(), same(eag), prompts.size());
  std::printf("%-22s %10.1f %12.2f %9.2fx %7d/%zu\n", "EAGLE-3, auto shape", eau.tokens_per_second(),
              eau.spec.mean_acceptance_length(), eau.tokens_per_second() / base.tokens_per_second(), same(eau), prompts.size());
  std::printf("draft: %s\n", ts.export_dir.c_str());
}
}  // namespace

void add_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand("demo", "target -> online EAGLE-3 training -> speculative decoding benchmark");
  add_common_options(cmd, &o->common);
  cmd->add_option("--data", o->data, "training texts (default: TinyStories from ../shared with -m, else built-in)");
  cmd->add_option("--output", o->output, "run directory (checkpoints, export)");
  cmd->add_option("--steps", o->steps, "training steps")->check(CLI::PositiveNumber);
  cmd->add_option("--num-samples", o->num_samples, "texts to regenerate and train on")->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", o->max_tokens, "tokens per benchmark prompt")->check(CLI::PositiveNumber);
  cmd->callback([o] { run_demo(*o); });
}

}  // namespace eaglet::cli
