// The one engine loop every path drives: `generate`, `bench`, `demo`, `regen` and `serve`.
//
// step() runs one iteration over every admitted sequence in three parts, as vLLM v1 splits its
// scheduler, model runner and rejection sampler: plan() picks prefill chunks within the token
// budget and drafts every decoding sequence's tree (one batched proposer call); execute() builds
// one target forward holding each decoding sequence's root token and draft tree plus the prefill
// chunks, and runs it; apply() verifies each tree losslessly, compacts the KV cache to the
// accepted path (the proposer folds the path into its own state) and emits tokens through the
// request's callbacks. It is synchronous: the server's scheduler thread only admits requests and
// calls step(); the single-request helpers in engine/generator.h do the same on the caller's
// thread. Greedy output is the same alone, batched, with or without drafts (the kernels are
// batch invariant, see kernels/ops.h).
#pragma once
#include <memory>
#include <vector>

#include "engine/sample_sink.h"
#include "engine/request.h"
#include "engine/engine_observer.h"
#include "engine/tap_history.h"
#include "speculation/metrics.h"
#include "speculation/spec_setup.h"

namespace eaglet {

struct Verdict;

struct EngineOptions {
  int max_num_seqs = 16;
  int max_model_len = 0;        // 0: the model's context length
  int64_t kv_blocks = 0;        // 0: room for max_num_seqs full-length sequences, within kv_cache_bytes
  int64_t kv_cache_bytes = 0;   // KV memory (target + draft) budget; 0: half the memory available
  int prefill_chunk = 512;      // prompt tokens per step, over all sequences
};

class EngineCore {
 public:
  // Every forward (target and draft) runs on `pool`, the engine's execution context. `metrics`
  // (optional) receives the serving counters; `pool` and `spec` must outlive the engine.
  EngineCore(ThreadPool& pool, Model& target, const Tokenizer& tok, const SpecSetup& spec, EngineOptions opts,
             EngineObserver* metrics = nullptr);
  ~EngineCore();
  const EngineOptions& options() const { return opts_; }

  // Admits a request when a sequence slot and its KV blocks are free; false leaves it queued with
  // the caller. The prompt plus max_tokens must fit max_model_len (callers check first). A
  // request whose prompt another is still prefilling shares that prefill (n > 1 choices).
  bool try_add(std::shared_ptr<Request> r);
  // One engine iteration (see above). Cancelled requests leave first.
  void step();
  // Finishes every sequence with `reason` (shutdown, or a failed step).
  void abort_all(const std::string& reason);
  bool has_work() const { return !running_.empty(); }
  int num_running() const { return int(running_.size()); }
  double kv_usage() const;
  // Speculation counters and timings since construction.
  const SpecMetrics& spec_metrics() const { return spec_metrics_; }

  // Online learning (`serve --online-train`). Both are called on the engine's thread between steps.
  // capture(): finished sequences (those not marked Request::no_capture, a `fraction` of them)
  // go to `opts.sink` with their taps; also keeps every sequence's tap history, so that a later
  // swap_draft() can rebuild its draft state. Call before the first request.
  void capture(const CaptureOptions& opts);
  // Replaces the draft (EAGLE-3 or DFlash, of the kind, taps and shape in use). Each sequence that
  // drafts gets its draft KV rebuilt from its history; one without history (capture() not called)
  // continues without drafts. Output stays exactly the target's either way.
  void swap_draft(std::shared_ptr<const ServedDraft> draft, int version);
  int draft_version() const { return draft_version_; }

 private:
  struct Seq;
  struct StepPlan;
  void size_kv_cache();
  void finish(Seq& s, const std::string& reason);
  void follow_same_prompt(Seq& s);
  bool emit(Seq& s, int token, const float* logits_row);
  // Rows the target just ran for `s` (tokens with their taps): into its prompt taps while it
  // prefills, and into the tap history when one is kept.
  void record_rows(Seq& s, const int* tokens, const float* taps, size_t n);

  // The parts of step(), in order.
  void drop_cancelled();
  StepPlan plan();
  void draft(const std::vector<Seq*>& all_decoding, int fixed_tokens);
  void execute(const StepPlan& plan);
  void fill_chunk(const Seq& s, size_t prefill_tokens, SeqChunk& c) const;
  void apply(const StepPlan& plan);
  size_t apply_prefill(Seq& s, const SeqChunk& c, const float* taps, size_t row);
  void start_decoding(Seq& s, const float* logits);
  void apply_decode(Seq& s, const SeqChunk& c, const float* logits, const float* taps, std::vector<float>& accepted_taps);
  void observe_verdict(Seq& s, const Verdict& v);
  void retire_finished();

  ThreadPool& pool_;
  Model& target_;
  const Tokenizer& tok_;
  const SpecSetup& spec_;
  EngineOptions opts_;
  EngineObserver* metrics_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Proposer> proposer_;
  std::unique_ptr<DraftPolicy> policy_;
  std::vector<int> taps_;   // layers the forward taps: the proposer's, then (capturing) the last layer
  size_t proposer_taps_ = 0;  // how many of taps_ the proposer reads
  std::unique_ptr<TapHistory> history_;  // capture(): every sequence's tokens and taps
  std::shared_ptr<const ServedDraft> served_;  // the draft proposer_ reads (spec_'s, or one swap_draft() installed)
  int draft_version_ = 0;
  std::vector<std::unique_ptr<Seq>> running_;
  int64_t reserved_blocks_ = 0;
  SpecMetrics spec_metrics_;
  // Per-step buffers, reused so a step allocates only what grows.
  ForwardBatch batch_;
  ForwardOutput out_;
  std::vector<Proposer::Accepted> accepted_;
  std::vector<std::vector<float>> accepted_taps_;  // the taps each accepted_ entry points into
};

}  // namespace eaglet
