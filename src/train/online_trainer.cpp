#include "train/online_trainer.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/durable_file.h"
#include "io/mapped_file.h"
#include "train/draft_io.h"
#include "train/metrics.h"
#include "train/objective.h"
#include "train/torch_threads.h"

namespace eaglet {

namespace fs = std::filesystem;

namespace {
using clock_type = std::chrono::steady_clock;

// A module's parameters and buffers, copied (the guard's baseline, a rollback's starting point).
std::vector<torch::Tensor> weights_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> w;
  for (auto& p : m.parameters()) w.push_back(p.detach().clone());
  for (auto& b : m.buffers()) w.push_back(b.detach().clone());
  return w;
}

// Sets `m`'s parameters and buffers to `w` (from weights_of on a module of the same shape).
void set_weights(torch::nn::Module& m, const std::vector<torch::Tensor>& w) {
  torch::NoGradGuard ng;
  size_t i = 0;
  for (auto& p : m.parameters()) p.copy_(w.at(i++));
  for (auto& b : m.buffers()) b.copy_(w.at(i++));
}

// The objective's settings for traffic the engine captured (aligned as TorchSpec aligns its loss
// mask) under the online options.
TrainConfig online_config(const OnlineTrainOptions& o) {
  TrainConfig c;
  c.seed = o.seed;
  c.ttt_steps = o.ttt_steps;
  c.step_weight = o.step_weight;
  c.num_anchors = o.num_anchors;
  c.loss_mask = "torchspec";
  c.key_style = "midlayer";
  return c;
}

HiddenSample to_hidden(CapturedSequence&& c) {
  HiddenSample h;
  h.ids = std::move(c.ids);
  h.loss_mask = std::move(c.loss_mask);
  h.aux = std::move(c.aux);
  h.last = std::move(c.last);
  h.hidden = c.hidden;
  return h;
}

torch::optim::AdamW make_optimizer(const std::vector<torch::Tensor>& params, double lr) {
  return torch::optim::AdamW(params, torch::optim::AdamWOptions(lr).betas({0.9, 0.95}).weight_decay(0.0));
}

std::vector<torch::Tensor> trainable(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// One of the engine's threads for the length of a step (Hooks::take_core), returned however the
// step ends.
class CoreLoan {
 public:
  CoreLoan(const std::function<void(bool)>& take, bool wanted) : take_(wanted && take ? &take : nullptr) {
    if (take_) (*take_)(true);
  }
  ~CoreLoan() {
    if (take_) (*take_)(false);
  }
  CoreLoan(const CoreLoan&) = delete;
  CoreLoan& operator=(const CoreLoan&) = delete;

 private:
  const std::function<void(bool)>* take_;
};

// The first version number no folder in `dir` has: a crash after a version was exported but
// before the checkpoint recorded it must not make the next export overwrite it.
int first_free_version(const std::string& dir, int at_least) {
  int next = at_least;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 1 && n[0] == 'v' && n.find_first_not_of("0123456789", 1) == std::string::npos && n.size() < 10)
      next = std::max(next, std::stoi(n.substr(1)) + 1);
  }
  return next;
}
}  // namespace

struct OnlineTrainer::State {
  TrainConfig cfg;                   // the objective's settings (it keeps a reference)
  std::unique_ptr<DraftObjective> draft;  // the module being trained, its loss and export
  std::vector<torch::Tensor> serving;     // the serving version's weights: the guard's baseline
  std::unique_ptr<torch::optim::AdamW> optim;
  std::vector<torch::Tensor> params;
  std::vector<HiddenSample> eval;    // the held-back slice (a ring of the most recent)
  size_t eval_next = 0;
  std::deque<HiddenSample> fresh;    // captured, not yet trained on
  std::vector<HiddenSample> replay;  // reservoir over everything trained on
  int64_t reservoir_seen = 0;
  int64_t batch_samples = 0;         // samples drawn into batches so far (DFlash anchors' seeds)
  std::mt19937_64 rng;
  int next_version = 1;
  MetricsLog log{""};
  clock_type::time_point last_save = clock_type::now();
};

OnlineTrainer::OnlineTrainer(const Model& target, const std::string& draft_dir, int version, OnlineTrainOptions opts,
                             Hooks hooks)
    : target_(target), opts_(std::move(opts)), hooks_(std::move(hooks)), st_(std::make_unique<State>()) {
  EAGLET_CHECK(!opts_.dir.empty(), "--online-train-dir is required with --online-train");
  EAGLET_CHECK(opts_.batch_size > 0 && opts_.eval_every > 0 && opts_.ttt_steps > 0 && opts_.replay_size > 0,
               "--online-train: batch size, eval interval, TTT steps and replay size must be positive");
  EAGLET_CHECK(opts_.max_cpu_share > 0 && opts_.max_cpu_share <= 1, "--online-train-cpu-share must be in (0, 1]");
  EAGLET_CHECK(opts_.busy_cpu_share >= 0 && opts_.busy_cpu_share <= 1, "--online-train-busy-share must be in [0, 1]");
  EAGLET_CHECK(opts_.num_anchors > 0, "--online-train-anchors must be positive");
  fs::create_directories(opts_.dir);
  State& s = *st_;
  s.cfg = online_config(opts_);
  s.draft = load_objective(s.cfg, draft_dir, target_);
  s.serving = weights_of(s.draft->module());
  s.rng.seed(opts_.seed);
  s.next_version = version + 1;
  stats_.serving_version = version;
  s.params = trainable(s.draft->module());
  s.optim = std::make_unique<torch::optim::AdamW>(make_optimizer(s.params, opts_.lr));
  resume();
  s.next_version = first_free_version(opts_.dir, s.next_version);
  s.log = MetricsLog(opts_.dir + "/metrics.jsonl");
}

void OnlineTrainer::resume() {
  State& s = *st_;
  const std::string ck = opts_.dir + "/checkpoint";
  for (const std::string& dir : {ck, ck + ".old"}) {
    if (!fs::exists(dir + "/state.json")) continue;
    std::string file;
    torch::nn::Module& m = s.draft->module();
    const std::vector<torch::Tensor> before = weights_of(m);
    try {  // into a fresh optimizer, the module restored on failure: a file that fails half-way leaves nothing behind
      auto optim = std::make_unique<torch::optim::AdamW>(make_optimizer(s.params, opts_.lr));
      file = dir + "/state.json";
      const auto state = nlohmann::json::parse(read_text_file(file));
      const int64_t step = state.at("step").get<int64_t>(), trained = state.at("samples_trained").get<int64_t>();
      const int next = state.at("next_version").get<int>();
      file = dir + "/model.pt";
      torch::serialize::InputArchive in;
      in.load_from(file);
      m.load(in);
      file = dir + "/optimizer.pt";
      torch::load(*optim, file);
      s.optim = std::move(optim);
      stats_.steps = step;
      stats_.samples_trained = trained;
      s.next_version = std::max(s.next_version, next);
      if (dir != ck) spdlog::warn("online training: resuming from the previous checkpoint {}", dir);
      spdlog::info("online training resumes from {} (step {}, serving draft version {})", dir, stats_.steps,
                   stats_.serving_version);
      return;
    } catch (const std::exception& e) {
      set_weights(m, before);
      spdlog::warn("online training: checkpoint file {} cannot be read ({}); trying the one before", file,
                   std::string(e.what()).substr(0, 200));
    }
  }
  if (fs::exists(ck) || fs::exists(ck + ".old"))
    spdlog::warn("online training: no readable checkpoint in {}: training starts again from the serving draft", opts_.dir);
}

// Written into checkpoint.tmp and flushed; then checkpoint -> checkpoint.old, checkpoint.tmp ->
// checkpoint, each rename flushed. A crash at any point leaves checkpoint or checkpoint.old whole.
void OnlineTrainer::save() {
  State& s = *st_;
  const std::string ck = opts_.dir + "/checkpoint", tmp = ck + ".tmp", old = ck + ".old";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  torch::serialize::OutputArchive out;
  s.draft->module().save(out);
  out.save_to(tmp + "/model.pt");
  torch::save(*s.optim, tmp + "/optimizer.pt");
  const OnlineTrainStats now = stats();
  write_file_durably(tmp + "/state.json", nlohmann::json{{"step", now.steps}, {"samples_trained", now.samples_trained},
                                                          {"next_version", s.next_version}}.dump(1));
  fsync_folder(tmp);
  crash_point("checkpoint-written");
  if (fs::exists(ck)) {
    fs::remove_all(old);
    rename_durably(ck, old);
  }
  crash_point("checkpoint-between-renames");
  rename_durably(tmp, ck);
  fs::remove_all(old);
  s.last_save = clock_type::now();
  spdlog::info("online training: checkpoint at step {}", now.steps);
}

OnlineTrainer::~OnlineTrainer() { stop(); }

void OnlineTrainer::consume(CapturedSequence s) {
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.samples_seen;
  if (stop_ || int(queue_.size()) >= opts_.queue_size) {
    ++stats_.dropped;
    return;
  }
  queue_.push_back(std::move(s));
  cv_.notify_one();
}

void OnlineTrainer::start() {
  thread_ = std::thread([this] {
    try {
      run();
    } catch (const std::exception& e) {
      spdlog::error("online training stopped: {}", e.what());
    }
  });
}

void OnlineTrainer::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OnlineTrainer::reset_to(const std::string& dir, int version) {
  std::lock_guard<std::mutex> lk(mu_);
  reset_dir_ = dir;
  reset_version_ = version;
}

OnlineTrainStats OnlineTrainer::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void OnlineTrainer::run() {
  // Lower priority for this thread and the ones it starts (libtorch's, the pool's inherit it).
  if (opts_.nice != 0) setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), opts_.nice);
  set_torch_threads(opts_.threads);
  ThreadPool pool(opts_.threads);
  int64_t saved_step = stats().steps;
  while (take_arrivals()) {
    State& s = *st_;
    const bool busy = hooks_.busy && hooks_.busy();
    const double share = busy ? std::min(opts_.busy_cpu_share, opts_.max_cpu_share) : opts_.max_cpu_share;
    if (share <= 0 || s.fresh.size() + s.replay.size() < size_t(opts_.batch_size)) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return stop_ || !queue_.empty(); });
      continue;
    }
    const auto t0 = clock_type::now();
    {
      CoreLoan loan(hooks_.take_core, busy);
      train_step(pool);
    }
    const double step_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    OnlineTrainStats now;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.train_seconds += step_seconds;
      if (busy) stats_.busy_train_seconds += step_seconds;
      now = stats_;
    }
    if (now.steps % opts_.eval_every == 0) now = judge_candidate(pool, now);
    const double since_save = std::chrono::duration<double>(clock_type::now() - s.last_save).count();
    if (now.steps % opts_.save_every == 0 || since_save >= opts_.save_every_seconds) {
      save();
      saved_step = now.steps;
    }
    if (hooks_.on_stats) hooks_.on_stats(now);
    // Stay within the CPU share: sleep in proportion to the step (and judgement) just taken.
    const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    const double pause = dt * (1.0 / share - 1.0);
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::duration<double>(pause), [&] { return stop_; });
  }
  if (stats().steps > saved_step) save();
}

// What arrived since the last call: a rollback first (train on from the weights now serving),
// then the captured sequences, a share held back for the guard and the rest queued for training.
// False once stopped.
bool OnlineTrainer::take_arrivals() {
  State& s = *st_;
  std::vector<CapturedSequence> arrived;
  std::string reset_dir;
  int reset_version = -1;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (stop_) return false;
    arrived.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    std::swap(reset_dir, reset_dir_);
    std::swap(reset_version, reset_version_);
  }
  if (!reset_dir.empty()) {
    const std::unique_ptr<DraftObjective> back = load_objective(s.cfg, reset_dir, target_);
    s.serving = weights_of(back->module());
    set_weights(s.draft->module(), s.serving);
    s.optim = std::make_unique<torch::optim::AdamW>(make_optimizer(s.params, opts_.lr));
    std::lock_guard<std::mutex> lk(mu_);
    stats_.serving_version = reset_version;
    spdlog::info("online training restarts from draft version {} ({})", reset_version, reset_dir);
  }
  for (auto& c : arrived) {
    HiddenSample h = to_hidden(std::move(c));
    if (std::uniform_real_distribution<double>(0, 1)(s.rng) < opts_.eval_share) {
      if (int(s.eval.size()) < opts_.eval_samples) s.eval.push_back(std::move(h));
      else s.eval[s.eval_next++ % s.eval.size()] = std::move(h);
    } else {
      s.fresh.push_back(std::move(h));
    }
  }
  return true;
}

// One optimiser step. The batch: the newest traffic first (up to half), the rest drawn from the
// reservoir (by pointer: a sample is [T, 4H] floats, not to be copied per step); what was fresh
// then joins the reservoir.
void OnlineTrainer::train_step(ThreadPool& pool) {
  State& s = *st_;
  const size_t B = size_t(opts_.batch_size);
  std::vector<HiddenSample> trained_fresh;
  const size_t from_fresh = s.replay.size() < B ? std::min(B, s.fresh.size()) : std::min((B + 1) / 2, s.fresh.size());
  for (size_t i = 0; i < from_fresh; ++i) {
    trained_fresh.push_back(std::move(s.fresh.front()));
    s.fresh.pop_front();
  }
  std::vector<const HiddenSample*> batch;
  for (const HiddenSample& h : trained_fresh) batch.push_back(&h);
  while (batch.size() < B)  // (the reservoir is not empty here: fresh + replay >= B)
    batch.push_back(&s.replay[std::uniform_int_distribution<size_t>(0, s.replay.size() - 1)(s.rng)]);
  const double lr = opts_.lr * std::min(1.0, double(stats().steps + 1) / double(std::max(1, opts_.warmup)));
  for (auto& group : s.optim->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  torch::nn::Module& m = s.draft->module();
  m.train();
  m.zero_grad();
  const TttBatch b = make_batch(pool, target_, batch, LossMaskAlignment::TorchSpec);
  s.draft->prepare(b, s.batch_samples);
  s.batch_samples += int64_t(batch.size());
  TttResult res = s.draft->loss(b, nullptr);
  res.loss.backward();
  torch::nn::utils::clip_grad_norm_(s.params, opts_.grad_clip);
  s.optim->step();
  for (auto& h : trained_fresh) {  // reservoir sampling over everything trained on
    ++s.reservoir_seen;
    if (int(s.replay.size()) < opts_.replay_size) {
      s.replay.push_back(std::move(h));
    } else {
      const auto j = std::uniform_int_distribution<int64_t>(0, s.reservoir_seen - 1)(s.rng);
      if (j < opts_.replay_size) s.replay[size_t(j)] = std::move(h);
    }
  }
  OnlineTrainStats now;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.steps;
    stats_.samples_trained += int64_t(trained_fresh.size());
    now = stats_;
  }
  if (now.steps % 25 == 0)
    s.log.write({{"kind", "train"}, {"step", now.steps}, {"loss", res.loss.item<double>()}, {"lr", lr},
                 {"samples_seen", now.samples_seen}, {"samples_trained", now.samples_trained},
                 {"dropped", now.dropped}, {"replay", s.replay.size()}, {"held_back", s.eval.size()}});
}

// The guard: the module now against the serving weights, by acceptance length on the held-back
// traffic; a candidate at least min_gain better is exported as the next version and offered
// to the server. Returns the stats after the decision.
OnlineTrainStats OnlineTrainer::judge_candidate(ThreadPool& pool, const OnlineTrainStats& now) {
  State& s = *st_;
  if (int(s.eval.size()) < opts_.min_eval_samples) {
    spdlog::info("online training: step {}, {} held-back samples (fewer than {}): no candidate yet", now.steps,
                 s.eval.size(), opts_.min_eval_samples);
    return now;
  }
  torch::nn::Module& m = s.draft->module();
  auto score = [&] {
    const int S = s.draft->slots();
    const std::vector<double> n = s.draft->eval_counts(pool, target_, s.eval, opts_.batch_size);
    std::vector<double> accuracy;
    for (int i = 0; i < S; ++i) accuracy.push_back(n[size_t(S + i)] > 0 ? n[size_t(i)] / n[size_t(S + i)] : 0);
    return s.draft->acceptance(accuracy, n[size_t(2 * S)], n[size_t(2 * S + 1)]);
  };
  const std::vector<torch::Tensor> trained = weights_of(m);
  set_weights(m, s.serving);
  const double serving = score();
  set_weights(m, trained);
  if (opts_.poison > 0) {  // a deliberately broken candidate (tests of the guard); training goes on unbroken
    torch::NoGradGuard ng;
    for (auto& p : m.parameters()) p.add_(torch::randn_like(p) * opts_.poison);
  }
  const double candidate = score();
  Candidate c{"", 0, now.serving_version, serving, candidate, now.steps};
  // Exported aside, flushed, then renamed (a version folder is whole or absent) and offered to the
  // server; installed, DraftVersions records it in versions.json.
  auto offer = [&] {
    c.version = s.next_version++;
    c.dir = opts_.dir + "/v" + std::to_string(c.version);
    fs::remove_all(c.dir + ".tmp");
    s.draft->write_export(c.dir + ".tmp");
    fsync_folder(c.dir + ".tmp");
    rename_durably(c.dir + ".tmp", c.dir);
    crash_point("version-exported");
    return hooks_.install && hooks_.install(c);
  };
  const bool passed = candidate >= serving + opts_.min_gain, installed = passed && offer();
  if (installed) s.serving = weights_of(m);
  if (opts_.poison > 0) set_weights(m, trained);
  spdlog::info("online training: step {}: candidate {:.3f} vs serving {:.3f} ({}, {} held-back samples): {}",
               now.steps, candidate, serving, s.draft->acceptance_label(), s.eval.size(),
               installed ? fmt::format("swapped in as version {}", c.version)
               : passed  ? fmt::format("exported as version {}, not swapped in", c.version)
                         : "rejected by the guard");
  s.log.write({{"kind", "guard"}, {"step", now.steps}, {"serving", serving}, {"candidate", candidate},
               {"installed", installed}, {"version", installed ? c.version : now.serving_version},
               {"held_back", s.eval.size()}});
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.candidates;
  (installed ? stats_.accepted : stats_.rejected) += 1;
  if (installed) stats_.serving_version = c.version;
  stats_.last_serving_score = serving;
  stats_.last_candidate_score = candidate;
  return stats_;
}

}  // namespace eaglet
