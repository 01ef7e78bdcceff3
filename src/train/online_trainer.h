// `eaglet serve --online-train`: a draft that keeps learning from the traffic it serves (Liu et
// al., "Online Speculative Decoding", 2023, with EAGLE-3's TTT loss or DFlash's block loss).
//
// The engine core captures finished sequences with the target's taps at every position it ran
// (engine/sample_sink.h); consume() queues them. A background thread, at low priority and on at
// most a set share of one core (a smaller guaranteed one while the engine is busy, so a saturated
// server still learns), trains the same
// draft module with the same objective as `eaglet train` (train/objective.h: an EAGLE-3 draft
// under the TTT unroll, a DFlash draft under the block loss at random anchors) on batches that mix
// the newest traffic with a reservoir of everything seen (so the draft does not forget). Every
// `eval_every` steps the module is judged against the serving draft on a held-back slice of
// recent traffic (EAGLE-3: acceptance simulated from the target's recorded distributions; DFlash:
// the greedy acceptance of every block, counted); a candidate that is not worse is exported (the
// Hugging Face layout of `eaglet train`) and offered through on_candidate, which swaps it in.
// Checkpoints (module, AdamW, step, versions) make a restarted server resume where it stopped.
// No libtorch in this header: the CLI wires it to the server.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/sample_sink.h"
#include "models/model.h"

namespace eaglet {

struct OnlineTrainOptions {
  std::string dir;             // checkpoint/, versions v1/ v2/ ..., versions.json, metrics.jsonl
  int threads = 1;             // the trainer's threads (libtorch and the target-logit matmuls)
  int nice = 10;               // scheduling priority of those threads (Linux nice; 0 = as the server)
  // Computes at most this share of the wall time (sleeps in between): at nice 10 all the engine
  // leaves it (steps per served request are what the gain follows, docs/online-training.md),
  double max_cpu_share = 1.0;
  double busy_cpu_share = 0.2;  // and this share while the engine is busy (Hooks::busy; 0: pause)
  int batch_size = 8;
  double lr = 1e-3;            // AdamW (0.9, 0.95), constant after `warmup` steps
  int warmup = 20;
  double grad_clip = 0.5;
  int ttt_steps = 3;            // EAGLE-3
  double step_weight = 0.8;
  int num_anchors = 32;         // DFlash: blocks drawn per sequence per step (at most)
  int eval_every = 50;         // steps between candidates
  int eval_samples = 48;       // the held-back slice: the most recent captured sequences set aside
  double eval_share = 0.1;     // share of captured sequences held back
  int min_eval_samples = 8;    // no candidate is judged on fewer
  int replay_size = 1024;      // reservoir of earlier traffic
  int queue_size = 256;        // captured sequences waiting for the trainer; beyond, dropped
  double min_gain = 0.0;       // a candidate must score at least serving + min_gain
  int save_every = 100;        // steps between checkpoints,
  double save_every_seconds = 60;  // or seconds, whichever comes first (a server killed often still advances)
  uint64_t seed = 0;
  double poison = 0;           // tests: Gaussian noise of this std added to each candidate
};

struct OnlineTrainStats {
  int64_t steps = 0, samples_seen = 0, samples_trained = 0, dropped = 0;
  double train_seconds = 0, busy_train_seconds = 0;  // wall time stepping; of it, while the engine was busy
  int64_t candidates = 0, rejected = 0, accepted = 0;
  int serving_version = 0;
  double last_serving_score = 0, last_candidate_score = 0;
};

class OnlineTrainer : public SampleSink {
 public:
  struct Candidate {
    std::string dir;  // the exported draft
    int version = 0;
    int based_on = 0;  // the serving version it was judged against
    double serving_score = 0, candidate_score = 0;  // acceptance length on the held-back traffic
    int64_t step = 0;
  };
  struct Hooks {
    // The guard passed `c`: swap it in; false if that failed (the trainer then keeps the old one).
    std::function<bool(const Candidate& c)> install;
    std::function<bool()> busy;  // the engine is busy: train within busy_cpu_share only
    // Around each step taken while the engine is busy (true before, false after): the engine
    // lends the trainer one of its threads, so the busy share is a core of its own, not a
    // time slice fought over at a low priority (which slowed every engine step instead).
    std::function<void(bool take)> take_core;
    std::function<void(const OnlineTrainStats&)> on_stats;
  };

  // `draft_dir`: the draft serving at start (version `version`). Resumes from opts.dir's
  // checkpoint when there is one.
  OnlineTrainer(const Model& target, const std::string& draft_dir, int version, OnlineTrainOptions opts, Hooks hooks);
  ~OnlineTrainer() override;
  void consume(CapturedSequence s) override;  // the engine's thread: queues, never blocks
  void start();
  void stop();  // finishes the step in progress, saves a checkpoint (SIGTERM ends here)
  // After a rollback to `version` (served from `dir`): training restarts from its weights.
  void reset_to(const std::string& dir, int version);
  OnlineTrainStats stats() const;

 private:
  struct State;
  void run();
  // The steps of run(), on the trainer thread.
  bool take_arrivals();
  void train_step(ThreadPool& pool);
  OnlineTrainStats judge_candidate(ThreadPool& pool, const OnlineTrainStats& now);
  // Resumes from DIR/checkpoint, else from DIR/checkpoint.old (a crash between the two renames of
  // a save leaves only that), skipping with a warning any that does not load.
  void resume();
  void save();  // crash-safe: written aside and flushed, then swapped in by renames

  const Model& target_;
  OnlineTrainOptions opts_;
  Hooks hooks_;
  std::unique_ptr<State> st_;  // libtorch state, touched by the trainer thread only
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CapturedSequence> queue_;
  OnlineTrainStats stats_;
  std::string reset_dir_;
  int reset_version_ = -1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace eaglet
