// `serve --online-train`'s options (built with or without the trainer, so the flag can say why it
// is missing).
#include <spdlog/spdlog.h>

#include <filesystem>

#include "cli/online_train.h"
#include "core/error.h"
#include "io/hf_cache.h"
#include "io/json_config.h"

namespace eaglet::cli {

void add_online_train_options(CLI::App* cmd, OnlineTrainCliOptions* o) {
  cmd->add_flag("--online-train", o->enabled, "keep training the EAGLE-3 or DFlash draft on the traffic it serves (docs/online-training.md)");
  cmd->add_option("--online-train-dir", o->train.dir, "checkpoints, draft versions v1/ v2/ ..., metrics.jsonl (a restart resumes)");
  cmd->add_option("--online-train-fraction", o->fraction, "share of requests captured for training")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--online-train-threads", o->train.threads, "trainer threads")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-cpu-share", o->train.max_cpu_share, "most of the wall time the trainer computes")->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--online-train-busy-share", o->train.busy_cpu_share,
                  "share of the wall time the trainer still computes while the engine is busy (0: pause)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--online-train-pause-above", o->pause_above,
                  "the engine counts as busy above this share of the time, or while requests wait (1: only when they wait)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--online-train-nice", o->train.nice, "trainer thread priority (Linux nice)")->check(CLI::Range(0, 19));
  cmd->add_option("--online-train-batch", o->train.batch_size, "sequences per step")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-lr", o->train.lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-anchors", o->train.num_anchors, "DFlash: blocks drawn per captured sequence per step")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-eval-every", o->train.eval_every, "steps between candidate drafts")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-eval-samples", o->train.eval_samples, "held-back recent sequences the guard scores on")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-replay", o->train.replay_size, "reservoir of earlier traffic mixed into batches")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-max-tokens", o->max_tokens, "tokens kept per captured sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-save-every", o->train.save_every, "steps between checkpoints")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-save-seconds", o->train.save_every_seconds, "seconds between checkpoints (whichever of the two comes first; also on SIGTERM)")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-min-gain", o->train.min_gain, "held-back acceptance length a candidate must gain over the serving draft");
  cmd->add_option("--online-train-judge-drafts", o->versions.judge_drafts, "drafts a new version serves before its live acceptance is judged")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-max-drop", o->versions.max_drop, "live acceptance length a new version may lose before it is rolled back")->check(CLI::NonNegativeNumber);
  cmd->add_option("--online-train-poison", o->train.poison, "tests: noise of this std added to every candidate (the guard must reject them)")
      ->group("");  // hidden
}

std::unique_ptr<SpecSetup> load_serving_spec(const OnlineTrainCliOptions& o, SpecOptions spec, const Model& target,
                                             DraftHistory* history) {
  history->entries.clear();
  if (!o.enabled) return std::make_unique<SpecSetup>(spec, target);
  EAGLET_CHECK(!o.train.dir.empty(), "--online-train needs --online-train-dir (checkpoints and draft versions go there)");
  std::filesystem::create_directories(o.train.dir);
  *history = DraftHistory::load(o.train.dir);
  if (history->entries.empty()) {
    EAGLET_CHECK(!spec.draft_dir.empty(), "--online-train trains an EAGLE-3 or DFlash draft: give one with --draft");
    history->entries.push_back({0, DraftHistory::stored(o.train.dir, resolve_model_path(spec.draft_dir))});
    return std::make_unique<SpecSetup>(spec, target);
  }
  for (;;) {
    const DraftHistory::Entry& e = history->entries.back();
    spec.draft_dir = DraftHistory::resolve(o.train.dir, e.dir);
    try {
      auto s = std::make_unique<SpecSetup>(spec, target);
      spdlog::info("online training: serving draft version {} from {} (the latest in {})", e.version, spec.draft_dir,
                   o.train.dir);
      return s;
    } catch (const std::exception& err) {
      if (history->entries.size() < 2) throw;
      spdlog::warn("online training: draft version {} ({}) does not load ({}); serving version {} instead", e.version,
                   spec.draft_dir, err.what(), history->entries[history->entries.size() - 2].version);
      history->entries.pop_back();
      history->save(o.train.dir);
    }
  }
}

}  // namespace eaglet::cli
