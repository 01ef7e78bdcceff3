// `eaglet train`, `eaglet regen` and `eaglet infer-worker`: the online EAGLE-3 training pipeline.
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
  bool json = false;
};

struct RegenCliOptions {
  CommonOptions common;
  RegenOptions regen;
  bool json = false;
};

// The summary line for people, or (--json) one JSON object for scripts and pipelines.
void print_summary(bool json, const nlohmann::json& j, const std::string& line) {
  std::puts(json ? j.dump().c_str() : line.c_str());
}

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
  cmd->add_flag("--json", o->json, "end with one JSON object (steps, timings, held-out accuracy, export) instead of the summary line");
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
    const nlohmann::json j = {
        {"steps", s.steps_done},
        {"wall_seconds", s.wall_seconds},
        {"train_seconds", s.train_seconds},
        {"trainer_busy_fraction", s.trainer_busy_fraction},
        {"eval_accuracy", s.eval_accuracy},
        {"eval_simulated_acceptance", s.eval_simulated_acceptance},
        {"finished", !s.export_dir.empty()},
        {"export_dir", s.export_dir.empty() ? nlohmann::json() : nlohmann::json(s.export_dir)},
        {"output_dir", cfg.output_dir},
        {"metrics", cfg.output_dir + "/metrics.jsonl"},
        {"samples", {{"produced", s.stream.produced}, {"consumed", s.stream.consumed}, {"reassigned", s.stream.reassigned}}}};
    print_summary(o->json, j,
                  fmt::format("steps {} | wall {:.1f}s | trainer busy {:.0f}% | eval simulated acceptance length (k=3) {:.2f} | export {}",
                              s.steps_done, s.wall_seconds, 100 * s.trainer_busy_fraction, s.eval_simulated_acceptance,
                              s.export_dir.empty() ? "(not finished)" : s.export_dir));
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
