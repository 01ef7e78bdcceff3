// `serve --online-train`: wires the online trainer (train/) to the serving engine (runtime/) and
// the server's rollback endpoint; server and train never include each other, this file joins them.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

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
  double pause_above = 0.8;    // engine utilization above which the trainer pauses
  DraftVersions::Options versions;
};
void add_online_train_options(CLI::App* cmd, OnlineTrainCliOptions* o);

// The draft a restarted server continues with: opts.dir's latest version (else `draft_dir`, version 0).
std::string online_train_draft(const OnlineTrainCliOptions& o, const std::string& draft_dir, int* version);

class OnlineSession {
 public:
  virtual ~OnlineSession() = default;  // stops the trainer (a checkpoint is saved)
};
// Starts capture and training; sets server->rollback_draft. `draft_dir`/`version`: what serves now.
std::unique_ptr<OnlineSession> start_online_training(const OnlineTrainCliOptions& o, ModelBundle& bundle,
                                                     const SpecSetup& spec, const std::string& draft_dir, int version,
                                                     Scheduler& scheduler, ServingMetrics& metrics,
                                                     ServerOptions* server);

}  // namespace eaglet::cli
