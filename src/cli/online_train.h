// `serve --online-train`: wires the online trainer (train/) to the serving engine (runtime/) and
// the server's rollback endpoint; server and train never include each other, this file joins them.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "runtime/draft_versions.h"
#include "server/openai_server.h"
#include "train/online_trainer.h"  // the options only (no libtorch): also in builds without the trainer

namespace eaglet::cli {

struct OnlineTrainCliOptions {
  bool enabled = false;
  OnlineTrainOptions train;    // the trainer's own (dir, threads, batch, guard, ...)
  double fraction = 1.0;       // CaptureOptions
  int max_tokens = 2048;
  double pause_above = 0.8;    // engine utilization above which the trainer keeps to its busy share
  DraftVersions::Options versions;
};
void add_online_train_options(CLI::App* cmd, OnlineTrainCliOptions* o);

// The drafts a server serves from: without --online-train, `spec.draft_dir` as given. With it,
// the history in --online-train-dir (versions.json: a restart serves what was serving), else
// `spec.draft_dir` as version 0. A version that no longer loads (a damaged folder) is dropped
// from the history with a warning naming it, and the one before it serves.
std::unique_ptr<SpecSetup> load_serving_spec(const OnlineTrainCliOptions& o, SpecOptions spec, const Model& target,
                                             DraftHistory* history);

class OnlineSession {
 public:
  virtual ~OnlineSession() = default;  // stops the trainer (a checkpoint is saved)
};
// Starts capture and training; sets server->rollback_draft. `history`: what served, back() now.
// `engine_pool`: the engine's threads, one of which the trainer takes while the engine is busy.
std::unique_ptr<OnlineSession> start_online_training(const OnlineTrainCliOptions& o, ModelBundle& bundle,
                                                     const SpecSetup& spec, const DraftHistory& history,
                                                     Scheduler& scheduler, ThreadPool& engine_pool,
                                                     ServingMetrics& metrics, ServerOptions* server);

}  // namespace eaglet::cli
