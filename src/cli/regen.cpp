// The two commands that produce training data without training: `regen` (responses regenerated
// by the target) and `infer-worker` (target hidden states streamed to a trainer over ZeroMQ).
// Neither needs libtorch, so both exist in a build with EAGLET_WITH_TRAINER=OFF.
#include <spdlog/spdlog.h>

#include <chrono>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/report.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "train/hidden_stream.h"
#include "train/regen.h"

namespace eaglet::cli {

namespace {

struct RegenCliOptions {
  CommonOptions common;
  RegenOptions regen;
  bool json = false;
};

struct WorkerOptions {
  CommonOptions common;
  std::string endpoint;
  int64_t exit_after = 0;
};

}  // namespace

void add_regen(CLI::App& app) {
  auto o = std::make_shared<RegenCliOptions>();
  CLI::App* cmd = app.add_subcommand("regen", "regenerate training data with the target (resumable)");
  add_common_options(cmd, &o->common);
  cmd->add_option("--data", o->regen.input, "texts: .txt, .jsonl or .json")->required();
  cmd->add_option("-o,--output", o->regen.output, "JSONL output (appended; finished samples are skipped)")->required();
  cmd->add_option("--num-samples", o->regen.num_samples, "samples to take (0 = all)");
  cmd->add_option("--temperature", o->regen.temperature, "sampling temperature");
  cmd->add_option("--max-new-tokens", o->regen.max_new_tokens, "tokens generated per sample");
  cmd->add_option("--prefix-tokens", o->regen.prefix_tokens, "tokens of each text kept as the prompt");
  cmd->add_option("--batch", o->regen.batch, "sequences decoded together");
  cmd->add_option("--samples-per-prompt", o->regen.samples_per_prompt, "independent continuations of each text");
  cmd->add_option("--seed", o->regen.seed, "sampling seed");
  cmd->add_flag("--json", o->json, "end with one JSON object (samples, output, seconds) instead of the summary line");
  cmd->callback([o] {
    apply_common_options(o->common);
    const auto pool = make_thread_pool(o->common.threads);
    ModelBundle b = load_target(o->common);
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = regenerate(*pool, *b.model, b.tokenizer, b.eos_ids, o->regen);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_summary(o->json, {{"samples", n}, {"output", o->regen.output}, {"wall_seconds", seconds}, {"model", b.label()}},
                  fmt::format("{} samples in {}", n, o->regen.output));
  });
}

void add_infer_worker(CLI::App& app) {
  auto o = std::make_shared<WorkerOptions>();
  CLI::App* cmd = app.add_subcommand("infer-worker", "compute target hidden states for a trainer over ZeroMQ");
  add_common_options(cmd, &o->common);
  cmd->add_option("--connect", o->endpoint, "the trainer's endpoint (inference.endpoint, e.g. tcp://127.0.0.1:5557)")
      ->required();
  cmd->add_option("--exit-after", o->exit_after, "testing: vanish without a word after N samples, like a crash");
  cmd->callback([o] {
    apply_common_options(o->common);
    const auto pool = make_thread_pool(o->common.threads);
    ModelBundle b = load_target(o->common);
    spdlog::info("infer-worker: {} -> {}", b.label(), o->endpoint);
    const int64_t n = run_inference_worker(*pool, *b.model, o->endpoint, o->exit_after);
    spdlog::info("infer-worker: done after {} samples", n);
  });
}

}  // namespace eaglet::cli
