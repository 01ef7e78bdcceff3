// `eaglet train`, `eaglet regen` and `eaglet infer-worker`: the online EAGLE-3 training pipeline.
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/launch.h"
#include "cli/report.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "train/distributed.h"
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
                  fmt::format("steps {} | wall {:.1f}s | trainer busy {:.0f}% | eval {} {:.2f} | export {}",
                              s.steps_done, s.wall_seconds, 100 * s.trainer_busy_fraction, s.acceptance_label,
                              s.eval_simulated_acceptance,
                              s.export_dir.empty() ? "(not finished)" : s.export_dir));
  });
}

}  // namespace eaglet::cli
