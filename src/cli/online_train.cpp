// `serve --online-train`'s options (built with or without the trainer, so the flag can say why it
// is missing).
#include <spdlog/spdlog.h>

#include <filesystem>

#include "cli/online_train.h"
#include "core/error.h"
#include "io/json_config.h"

namespace eaglet::cli {

void add_online_train_options(CLI::App* cmd, OnlineTrainCliOptions* o) {
  cmd->add_flag("--online-train", o->enabled, "keep training the EAGLE-3 draft on the traffic it serves (docs/online-training.md)");
  cmd->add_option("--online-train-dir", o->dir, "checkpoints, draft versions v1/ v2/ ..., metrics.jsonl (a restart resumes)");
  cmd->add_option("--online-train-fraction", o->fraction, "share of requests captured for training")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--online-train-threads", o->threads, "trainer threads")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-cpu-share", o->cpu_share, "most of the wall time the trainer computes")->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--online-train-pause-above", o->pause_above,
                  "pause training while the engine is busy more than this share of the time, or requests wait (1: only when they wait)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--online-train-nice", o->nice, "trainer thread priority (Linux nice)")->check(CLI::Range(0, 19));
  cmd->add_option("--online-train-batch", o->batch_size, "sequences per step")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-lr", o->lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-eval-every", o->eval_every, "steps between candidate drafts")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-eval-samples", o->eval_samples, "held-back recent sequences the guard scores on")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-replay", o->replay, "reservoir of earlier traffic mixed into batches")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-max-tokens", o->max_tokens, "tokens kept per captured sequence")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-min-gain", o->min_gain, "simulated acceptance a candidate must gain over the serving draft");
  cmd->add_option("--online-train-judge-drafts", o->judge_drafts, "drafts a new version serves before its live acceptance is judged")->check(CLI::PositiveNumber);
  cmd->add_option("--online-train-max-drop", o->max_drop, "live acceptance length a new version may lose before it is rolled back")->check(CLI::NonNegativeNumber);
  cmd->add_option("--online-train-poison", o->poison, "tests: noise of this std added to every candidate (the guard must reject them)")
      ->group("");  // hidden
}

std::string online_train_draft(const OnlineTrainCliOptions& o, const std::string& draft_dir, int* version) {
  *version = 0;
  if (!o.enabled) return draft_dir;
  // current.json names the version a guard passed last (written by the trainer).
  const std::string path = o.dir + "/current.json";
  if (o.dir.empty() || !std::filesystem::exists(path)) return draft_dir;
  const JsonConfig j = JsonConfig::load(path);
  *version = int(j.get_int("version"));
  const std::string resumed = j.get_string("dir", "");
  EAGLET_CHECK(!resumed.empty(), "{}: no \"dir\"", path);
  spdlog::info("online training: serving draft version {} from {} (the latest in {})", *version, resumed, o.dir);
  return resumed;
}

}  // namespace eaglet::cli
