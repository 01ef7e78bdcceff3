#include "runtime/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/system_memory.h"
#include "engine/generator.h"
#include "spec/eagle3_drafter.h"
#include "spec/ngram_proposer.h"
#include "spec/verifier.h"

namespace eaglet {

namespace {
using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

TokenLogprob logprob_of(const float* logits, int V, int token, int top) {
  float mx = -INFINITY;
  for (int i = 0; i < V; ++i) mx = std::max(mx, logits[i]);
  double z = 0;
  for (int i = 0; i < V; ++i) z += std::exp(double(logits[i] - mx));
  const float lz = float(std::log(z)) + mx;
  TokenLogprob t{token, logits[token] - lz, {}};
  if (top > 0) {
    std::vector<int> idx(static_cast<size_t>(V));
    for (int i = 0; i < V; ++i) idx[size_t(i)] = i;
    const int n = std::min(top, V);
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    for (int i = 0; i < n; ++i) t.top.emplace_back(idx[size_t(i)], logits[idx[size_t(i)]] - lz);
  }
  return t;
}
}  // namespace

struct Scheduler::Seq {
  std::shared_ptr<Request> req;
  SeqId kv = 0;
  SeqId draft_seq = 0;
  size_t prefilled = 0;
  bool decoding = false;
  int last = -1;
  int64_t blocks = 0;
  Sampler sampler;
  OutputTracker tracker;
  std::unique_ptr<NgramProposer> ngram;
  std::vector<float> prompt_taps;
  std::vector<int> drafts;
  clock_type::time_point last_token_time;
  size_t emitted_tokens = 0;
  std::vector<TokenLogprob> pending;
  Seq(std::shared_ptr<Request> r, const Tokenizer& tok)
      : req(std::move(r)), sampler(req->sampling), tracker(tok, req->stop) {}
};

Scheduler::Scheduler(ModelBundle& bundle, const SpecSetup& spec, SchedulerOptions opts, ServingMetrics& metrics)
    : bundle_(bundle), spec_(spec), opts_(opts), metrics_(metrics) {
  const auto& cfg = bundle_.model->config();
  if (opts_.max_model_len <= 0 || opts_.max_model_len > cfg.max_position) opts_.max_model_len = cfg.max_position;
  size_kv_cache();
  cache_ = std::make_unique<KvCache>(bundle_.model->kv_shape(opts_.kv_blocks));
  if (uses_drafter()) drafter_ = std::make_unique<Eagle3Drafter>(*spec_.draft(), opts_.kv_blocks);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { shutdown(); }

bool Scheduler::uses_drafter() const { return spec_.enabled() && spec_.method() == "eagle3"; }

// The KV cache is allocated up front, so its size is checked against memory first: a model whose
// config claims a 2-billion-token context must fail with advice, not std::bad_alloc.
void Scheduler::size_kv_cache() {
  const int64_t per_seq = kv_blocks_for(int64_t(opts_.max_model_len) + spec_.k() + 1);
  size_t block_bytes = bundle_.model->kv_shape(1).bytes_per_block();
  if (uses_drafter()) block_bytes += spec_.draft()->kv_shape(1).bytes_per_block();
  const bool default_budget = opts_.kv_cache_bytes <= 0;
  const int64_t budget = default_budget ? available_memory_bytes() / 2 : opts_.kv_cache_bytes;
  const int64_t fit = budget > 0 ? budget / int64_t(block_bytes) : per_seq * opts_.max_num_seqs;
  const double gb = 1e-9, seq_gb = double(per_seq) * double(block_bytes) * gb;
  const std::string budget_name = default_budget ? "half the memory available; --kv-cache-memory sets it" : "--kv-cache-memory";
  if (fit < per_seq)
    fail("max_model_len {} needs {:.3g} GB of KV cache for one sequence, more than the {:.3g} GB KV cache budget ({}): "
         "pass --max-model-len {} or less", opts_.max_model_len, seq_gb, double(budget) * gb, budget_name,
         std::max<int64_t>(0, fit - 1) * 16 - spec_.k() - 1);
  if (opts_.kv_blocks <= 0) {
    opts_.kv_blocks = std::min(per_seq * opts_.max_num_seqs, fit);
  } else {
    EAGLET_CHECK(opts_.kv_blocks >= per_seq, "--kv-blocks {} cannot hold one sequence of max_model_len {} ({} blocks)",
                 opts_.kv_blocks, opts_.max_model_len, per_seq);
    EAGLET_CHECK(opts_.kv_blocks <= fit, "--kv-blocks {} needs {:.3g} GB, more than the {:.3g} GB KV cache budget ({})",
                 opts_.kv_blocks, double(opts_.kv_blocks) * double(block_bytes) * gb, double(budget) * gb, budget_name);
  }
  spdlog::info("KV cache: {} blocks of 16 tokens ({:.3g} GB), room for {} sequences of max_model_len {}", opts_.kv_blocks,
               double(opts_.kv_blocks) * double(block_bytes) * gb, opts_.kv_blocks / per_seq, opts_.max_model_len);
}

bool Scheduler::submit(std::shared_ptr<Request> r) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stop_ || int(waiting_.size()) >= opts_.max_waiting) return false;
  waiting_.push_back(std::move(r));
  cv_.notify_one();
  return true;
}

void Scheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : running_) finish(*s, "abort");
  running_.clear();
  for (auto& r : waiting_)
    if (r->on_finish) r->on_finish("abort", 0);
  waiting_.clear();
}

void Scheduler::finish(Seq& s, const std::string& reason) {
  cache_->free(s.kv);
  if (drafter_) drafter_->remove(s.draft_seq);
  reserved_blocks_ -= s.blocks;
  metrics_.request_finished(reason);
  const std::string rest = s.tracker.take_new_text();
  if ((!rest.empty() || !s.pending.empty()) && s.req->on_output) s.req->on_output(rest, s.pending);
  s.pending.clear();
  if (s.req->on_finish) s.req->on_finish(reason, int(s.tracker.tokens().size()));
}

void Scheduler::admit() {
  std::lock_guard<std::mutex> lk(mu_);
  while (!waiting_.empty() && int(running_.size()) < opts_.max_num_seqs) {
    auto& r = waiting_.front();
    const int64_t need = kv_blocks_for(int64_t(r->prompt.size()) + r->stop.max_tokens + spec_.k() + 1);
    if (reserved_blocks_ + need > opts_.kv_blocks) break;  // wait for blocks to free up
    auto s = std::make_unique<Seq>(r, bundle_.tokenizer);
    s->kv = cache_->create();
    if (drafter_) s->draft_seq = drafter_->add();
    s->blocks = need;
    reserved_blocks_ += need;
    running_.push_back(std::move(s));
    waiting_.pop_front();
  }
}

// After every admission and every step, so an idle server reports zero running requests and an
// empty cache (updating only on admission left the last busy values on display forever).
void Scheduler::publish_gauges() {
  size_t waiting;
  {
    std::lock_guard<std::mutex> lk(mu_);
    waiting = waiting_.size();
  }
  metrics_.set_gauges(int(running_.size()), int(waiting),
                      1.0 - double(cache_->free_blocks()) / double(cache_->total_blocks()));
}

bool Scheduler::emit(Seq& s, int token, const float* logits_row) {
  const bool more = s.tracker.append(token);
  const auto now = clock_type::now();
  if (s.emitted_tokens == 0) metrics_.time_to_first_token(since(s.req->arrival));
  else metrics_.inter_token_latency(std::chrono::duration<double>(now - s.last_token_time).count());
  s.last_token_time = now;
  ++s.emitted_tokens;
  s.pending.push_back(s.req->top_logprobs >= 0
                          ? logprob_of(logits_row, bundle_.model->config().vocab, token, s.req->top_logprobs)
                          : TokenLogprob{token, 0, {}});
  if (more && s.req->on_output) {  // a finishing sequence sends its last text from finish()
    const std::string text = s.tracker.take_new_text();
    if (!text.empty() || !s.pending.empty()) {
      s.req->on_output(text, s.pending);
      s.pending.clear();
    }
  }
  metrics_.tokens(0, 1);
  return more;
}

void Scheduler::loop() {
  auto last_log = clock_type::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !waiting_.empty() || !running_.empty(); });
      if (stop_) return;
    }
    try {
      step();
    } catch (const std::exception& e) {
      spdlog::error("scheduler step failed: {}; aborting the running requests", e.what());
      for (auto& s : running_) finish(*s, "abort");
      running_.clear();
      publish_gauges();
    }
    if (since(last_log) > opts_.log_interval_s) {
      last_log = clock_type::now();
      const std::string line = metrics_.take_interval_summary();
      if (!line.empty()) spdlog::info("{}", line);
    }
  }
}

void Scheduler::step() {
  // Cancelled requests (client gone) leave first and free their blocks.
  for (auto& s : running_)
    if (s->req->cancelled) {
      finish(*s, "abort");
      s.reset();
    }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
  admit();
  if (running_.empty()) return publish_gauges();

  Model& model = *bundle_.model;
  const int V = model.config().vocab;
  const std::vector<int> taps = drafter_ ? drafter_->draft().config().aux_layers : std::vector<int>{};
  const size_t tap_row = taps.size() * size_t(model.config().hidden);

  // Drafts for every decoding sequence: one batched pass per draft step.
  std::vector<Seq*> decoding;
  std::vector<int> ks;
  for (auto& s : running_) {
    if (!s->decoding) continue;
    const int remaining = s->req->stop.max_tokens - int(s->tracker.tokens().size());
    const int64_t room = opts_.max_model_len - cache_->length(s->kv) - 1;
    decoding.push_back(s.get());
    ks.push_back(spec_.enabled() ? std::max(0, std::min<int>({spec_.k(), remaining - 1, int(room)})) : 0);
  }
  if (drafter_ && !decoding.empty()) {
    std::vector<SeqId> ids;
    for (auto* s : decoding) ids.push_back(s->draft_seq);
    auto drafts = drafter_->draft(ids, ks);
    for (size_t i = 0; i < decoding.size(); ++i) decoding[i]->drafts = drafts[i];
  } else {
    for (size_t i = 0; i < decoding.size(); ++i)
      decoding[i]->drafts = decoding[i]->ngram && ks[i] > 0 ? decoding[i]->ngram->draft(ks[i]) : std::vector<int>{};
  }
  for (size_t i = 0; i < decoding.size(); ++i)
    if (int(decoding[i]->drafts.size()) > ks[i]) decoding[i]->drafts.resize(size_t(ks[i]));

  // One target forward: decode/verify chunks, then prefill chunks within the token budget.
  ForwardBatch batch;
  batch.tap_layers = taps;
  std::vector<Seq*> order;
  int budget = opts_.prefill_chunk;
  for (auto& sp : running_) {
    Seq& s = *sp;
    SeqChunk c;
    c.seq = s.kv;
    if (s.decoding) {
      c.tokens = {s.last};
      c.tokens.insert(c.tokens.end(), s.drafts.begin(), s.drafts.end());
      for (size_t i = 0; i < c.tokens.size(); ++i) c.logit_rows.push_back(int(i));
    } else {
      if (budget <= 0) continue;
      const size_t n = std::min<size_t>(size_t(budget), s.req->prompt.size() - s.prefilled);
      c.tokens.assign(s.req->prompt.begin() + long(s.prefilled), s.req->prompt.begin() + long(s.prefilled + n));
      budget -= int(n);
      if (s.prefilled + n == s.req->prompt.size()) c.logit_rows = {int(n) - 1};
    }
    batch.chunks.push_back(std::move(c));
    order.push_back(&s);
  }
  ForwardOutput out;
  model.forward(*cache_, batch, &out);

  std::vector<Eagle3Drafter::Extend> extends;
  std::vector<std::vector<int>> extend_tokens(order.size());
  size_t row = 0, tok = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    Seq& s = *order[i];
    const SeqChunk& c = batch.chunks[i];
    const float* taps_here = out.taps.data() + tok * tap_row;
    tok += c.tokens.size();
    if (!s.decoding) {
      s.prefilled += c.tokens.size();
      if (drafter_) s.prompt_taps.insert(s.prompt_taps.end(), taps_here, taps_here + c.tokens.size() * tap_row);
      metrics_.tokens(int64_t(c.tokens.size()), 0);
      if (c.logit_rows.empty()) continue;
      const float* logits = out.logits.data() + row * size_t(V);
      ++row;
      s.last = s.sampler.sample(logits, V);
      s.decoding = true;
      if (!emit(s, s.last, logits)) continue;
      if (drafter_) {
        extend_tokens[i].assign(s.req->prompt.begin() + 1, s.req->prompt.end());
        extend_tokens[i].push_back(s.last);
        extends.push_back({s.draft_seq, extend_tokens[i], s.prompt_taps.data()});
      } else if (spec_.enabled()) {
        s.ngram = std::make_unique<NgramProposer>();
        s.ngram->begin(s.req->prompt, {}, s.last);
      }
      continue;
    }
    const float* logits = out.logits.data() + row * size_t(V);
    row += c.tokens.size();
    const int64_t len_before = cache_->length(s.kv) - int64_t(c.tokens.size());
    const Verdict v = verify_drafts(logits, V, s.drafts, s.sampler);
    if (!s.drafts.empty()) metrics_.spec_step(int(s.drafts.size()), v.accepted);
    cache_->truncate(s.kv, len_before + 1 + v.accepted);
    bool more = true;
    for (int a = 0; a < v.accepted && more; ++a) more = emit(s, s.drafts[size_t(a)], logits + size_t(a) * size_t(V));
    if (more) more = emit(s, v.next, logits + size_t(v.accepted) * size_t(V));
    if (!more) continue;
    s.last = v.next;
    if (drafter_) {
      extend_tokens[i].assign(s.drafts.begin(), s.drafts.begin() + v.accepted);
      extend_tokens[i].push_back(v.next);
      extends.push_back({s.draft_seq, extend_tokens[i], taps_here});
    } else if (s.ngram) {
      s.ngram->accept(v.accepted, v.next, nullptr);
    }
  }
  if (drafter_) drafter_->extend(extends);

  for (auto& sp : running_) {
    Seq& s = *sp;
    const bool full = cache_->length(s.kv) + 1 >= opts_.max_model_len;
    if (s.tracker.finished() || (s.decoding && full)) {
      finish(s, s.tracker.finished() ? s.tracker.finish_reason() : "length");
      sp.reset();
    }
  }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
  for (auto& s : running_)
    if (s->decoding) s->prompt_taps = {};
  publish_gauges();
}

}  // namespace eaglet
