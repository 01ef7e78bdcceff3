// `eaglet train`, `eaglet regen` and `eaglet infer-worker`: the online EAGLE-3 training pipeline.
#include <spdlog/spdlog.h>

#include <csignal>

#include "cli/commands.h"
#include "cli/launch.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "train/distributed.h"
#include "train/hidden_stream.h"
#include "train/regen.h"
#include "train/trainer.h"

namespace eaglet::cli {

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

struct TrainOptions {
  std::string config;
  std::vector<std::string> overrides;
  int nproc_per_node = 1;
  int stop_after_steps = 0;
  bool print_config = false;
};

struct RegenCliOptions {
  CommonOptions common;
  RegenOptions regen;
};

struct WorkerOptions {
  CommonOptions common;
  std::string endpoint;
  int64_t exit_after = 0;
};
}  // namespace

void add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "train an EAGLE-3 draft online against a target");
  cmd->add_option("--config", o->config, "YAML recipe (e.g. examples/stories260k/train.yaml)");
  cmd->add_option("overrides", o->overrides, "key=value overrides (e.g. output_dir=runs/x training.steps=100)");
  cmd->add_option("--nproc-per-node", o->nproc_per_node,
                  "data-parallel ranks on this host (c10d/Gloo; multi-host: run under torchrun's environment)");
  cmd->add_flag("--print-config", o->print_config, "print the effective configuration (aliases resolved) and exit");
  cmd->add_option("--stop-after-steps", o->stop_after_steps,
                  "stop with a checkpoint after N steps of this run, as SIGINT does (time-sliced jobs)");
  cmd->callback([o] {
    TrainConfig cfg = TrainConfig::load(o->config, o->overrides);
    if (o->print_config) {
      std::fputs(cfg.to_yaml().c_str(), stdout);
      return;
    }
    if (o->nproc_per_node > 1) {
      std::vector<std::string> args{"train"};
      if (!o->config.empty()) args.insert(args.end(), {"--config", o->config});
      if (o->stop_after_steps > 0) args.insert(args.end(), {"--stop-after-steps", std::to_string(o->stop_after_steps)});
      args.insert(args.end(), o->overrides.begin(), o->overrides.end());
      // Ranks that lose a peer stop on their own within the collective timeout; give them that.
      const int rc = launch_local_ranks(o->nproc_per_node, args, cfg.dist_timeout_s + 30);
      if (rc != 0) std::exit(rc);
      return;
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    TrainHooks hooks;
    hooks.stop_flag = &g_stop;
    hooks.stop_after_steps = o->stop_after_steps;
    TrainSummary s = run_training(cfg, hooks);
    if (DistEnv::from_environment().rank != 0) return;  // rank 0 reports for all
    std::printf("steps %lld | wall %.1fs | trainer busy %.0f%% | eval simulated acceptance length (k=3) %.2f | export %s\n",
                (long long)s.steps_done, s.wall_seconds, 100 * s.trainer_busy_fraction, s.eval_simulated_acceptance,
                s.export_dir.empty() ? "(not finished)" : s.export_dir.c_str());
  });
}

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
  cmd->callback([o] {
    apply_common_options(o->common);
    const auto pool = make_thread_pool(o->common.threads);
    ModelBundle b = load_target(o->common);
    const int64_t n = regenerate(*pool, *b.model, b.tokenizer, b.eos_ids, o->regen);
    std::printf("%lld samples in %s\n", (long long)n, o->regen.output.c_str());
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
