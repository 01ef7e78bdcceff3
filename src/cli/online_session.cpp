// The trainer side of `serve --online-train` (built with the trainer only).
#include "cli/online_train.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/hf_cache.h"
#include "train/online_trainer.h"

namespace eaglet::cli {

namespace {

class Session : public OnlineSession {
 public:
  ~Session() override {
    if (trainer) trainer->stop();
  }
  std::unique_ptr<DraftVersions> versions;
  std::unique_ptr<OnlineTrainer> trainer;
};

}  // namespace

std::unique_ptr<OnlineSession> start_online_training(const OnlineTrainCliOptions& o, ModelBundle& bundle,
                                                     const SpecSetup& spec, const DraftHistory& history,
                                                     Scheduler& scheduler, ThreadPool& engine_pool,
                                                     ServingMetrics& metrics, ServerOptions* server) {
  const std::shared_ptr<const ServedDraft>& initial = spec.served_draft();
  EAGLET_CHECK(initial, "--online-train trains an EAGLE-3 or DFlash draft: give one with --draft");
  EAGLET_CHECK(!o.train.dir.empty(), "--online-train needs --online-train-dir (checkpoints and draft versions go there)");
  auto s = std::make_unique<Session>();
  const Model& target = *bundle.model;
  // The trainer's exports load with the default options; the draft given at start (version 0,
  // reloaded by a rollback after a restart) as --aux-numbering / --draft-semantics said.
  const DraftKind kind = initial->kind();
  const std::string given = resolve_model_path(spec.options().draft_dir);
  const Eagle3LoadOptions given_options = spec.eagle3_load_options();
  const kernels::QuantScheme quantize = spec.draft_quantize();  // every version, as the first
  auto loader = [&target, kind, given, given_options, quantize](const std::string& dir) {
    return ServedDraft::load(kind, dir, target, dir == given ? given_options : Eagle3LoadOptions{}, quantize);
  };
  s->versions = std::make_unique<DraftVersions>(scheduler, metrics, initial, history, o.train.dir, loader, o.versions);
  DraftVersions* versions = s->versions.get();
  const std::string draft_dir = DraftHistory::resolve(o.train.dir, history.entries.back().dir);
  const int version = history.entries.back().version;
  OnlineTrainer::Hooks hooks;
  hooks.install = [versions, loader](const OnlineTrainer::Candidate& c) {
    try {
      return versions->install(loader(c.dir), c.dir, c.version,
                               fmt::format("acceptance length {:.3f} -> {:.3f} on the held-back traffic at trainer "
                                           "step {}", c.serving_score, c.candidate_score, c.step),
                               c.based_on);
    } catch (const std::exception& e) {
      spdlog::error("draft version {} ({}) could not be swapped in: {}", c.version, c.dir, e.what());
      return false;
    }
  };
  const double pause_above = o.pause_above;
  hooks.busy = [&scheduler, pause_above] {
    return scheduler.num_waiting() > 0 || (pause_above < 1.0 && scheduler.utilization() > pause_above);
  };
  // The engine runs a busy step on one thread fewer while the trainer computes on that core
  // (a pool of one thread has none to spare: the trainer then shares a core, at its nice level).
  hooks.take_core = [&engine_pool](bool take) { engine_pool.lend(take ? 1 : 0); };
  hooks.on_stats = [versions, &metrics](const OnlineTrainStats& st) {
    ServingMetrics::OnlineTraining m;
    m.steps = st.steps;
    m.samples = st.samples_trained;
    m.dropped = st.dropped;
    m.rejected = st.rejected;
    m.train_seconds = st.train_seconds;
    m.busy_train_seconds = st.busy_train_seconds;
    metrics.set_online_training(m);
    versions->check();
  };
  s->trainer = std::make_unique<OnlineTrainer>(target, draft_dir, version, o.train, hooks);
  OnlineTrainer* trainer = s->trainer.get();
  versions->on_rollback = [trainer](int v, const std::string& dir) { trainer->reset_to(dir, v); };
  server->rollback_draft = [versions] { return versions->rollback("POST /v1/draft/rollback"); };
  metrics.enable_online_training();
  CaptureOptions cap;
  cap.sink = trainer;
  cap.fraction = o.fraction;
  cap.max_tokens = o.max_tokens;
  scheduler.run_on_engine([&](EngineCore& e) { e.capture(cap); });
  trainer->start();
  spdlog::info("online training on: {} of requests captured, trainer on {} thread(s) at nice {} within {:.0f}% of the "
               "time ({:.0f}% while the engine is busy), a candidate every {} steps, versions in {}", o.fraction,
               o.train.threads, o.train.nice, 100 * o.train.max_cpu_share, 100 * o.train.busy_cpu_share,
               o.train.eval_every, o.train.dir);
  return s;
}

}  // namespace eaglet::cli
