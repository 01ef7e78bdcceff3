// `serve --online-train`: wires the online trainer (train/) to the serving engine (runtime/) and
// the server's rollback endpoint; server and train never include each other, this file joins them.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "engine/model_bundle.h"
#include "runtime/draft_versions.h"
#include "server/openai_server.h"

namespace eaglet::cli {

struct OnlineTrainCliOptions {
  bool enabled = false;
  std::string dir;
  double fraction = 1.0;
  int threads = 1, nice = 10, batch_size = 8, eval_every = 50, eval_samples = 48, replay = 1024, max_tokens = 2048;
  double pause_above = 0.8;  // engine utilization above which the trainer pauses
  double cpu_share = 0.5, lr = 1e-3, min_gain = 0.0, poison = 0;
  int64_t judge_drafts = 300;
  double max_drop = 0.15;
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
