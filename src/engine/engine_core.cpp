#include "engine/engine_core.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/system_memory.h"
#include "engine/generator.h"
#include "speculation/tree_verifier.h"

namespace eaglet {

namespace {
using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

TokenLogprob logprob_of(const float* logits, int V, int token, int top) {
  const float lz = float(log_partition(logits, V));
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

bool is_chain(const DraftTree& t) {
  for (int i = 0; i < t.size(); ++i)
    if (t.parents[size_t(i)] != i - 1) return false;
  return true;
}
}  // namespace

struct EngineCore::Seq {
  std::shared_ptr<Request> req;
  SeqId kv = 0;
  size_t prefilled = 0;
  bool decoding = false;
  bool proposing = false;  // the proposer knows this sequence
  int last = -1;
  int64_t blocks = 0;
  Sampler sampler;
  OutputTracker tracker;
  std::vector<float> prompt_taps;  // the proposer's taps of the prompt, until drafting begins
  DraftTree tree;
  DraftPolicy::SeqState policy;
  clock_type::time_point scheduled = clock_type::now(), first_token, last_token_time;
  size_t emitted_tokens = 0;
  std::vector<TokenLogprob> prompt_logprobs;  // while prefilling with Request::prompt_logprobs
  bool prompt_only = false;                   // max_tokens 0: finishes once prefilled
  std::vector<TokenLogprob> pending;
  // Requests with the same prompt share one prefill (n > 1 choices): a follower waits for its
  // leader's prompt and then forks the leader's KV blocks (copy-on-write).
  Seq* leader = nullptr;
  std::vector<Seq*> followers;
  Seq(std::shared_ptr<Request> r, const Tokenizer& tok)
      : req(std::move(r)), sampler(req->sampling), tracker(tok, req->stop, has_text(tok, req->prompt)) {}
  static bool has_text(const Tokenizer& tok, const std::vector<int>& prompt) {
    return std::any_of(prompt.begin(), prompt.end(), [&](int t) { return !tok.is_special(t); });
  }
};

EngineCore::EngineCore(ThreadPool& pool, Model& target, const Tokenizer& tok, const SpecSetup& spec,
                       EngineOptions opts, EngineObserver* metrics)
    : pool_(pool), target_(target), tok_(tok), spec_(spec), opts_(opts), metrics_(metrics) {
  const auto& cfg = target_.config();
  if (opts_.max_model_len <= 0 || opts_.max_model_len > cfg.max_position) opts_.max_model_len = cfg.max_position;
  size_kv_cache();
  cache_ = std::make_unique<KvCache>(target_.kv_shape(opts_.kv_blocks));
  if (spec_.enabled()) {
    proposer_ = spec_.new_proposer(opts_.kv_blocks, pool_);
    policy_ = spec_.new_policy(pool_, target_, proposer_->scores_drafts());
    taps_ = proposer_->tap_layers();
    proposer_taps_ = taps_.size();
    served_ = spec_.served_draft();
  }
}

void EngineCore::capture(const CaptureOptions& opts) {
  EAGLET_CHECK(running_.empty(), "capture() must come before the first request");
  EAGLET_CHECK(proposer_ && proposer_taps_ > 0, "online training captures a draft's taps: serve with an EAGLE-3 or DFlash --draft");
  if (opts.sink) taps_.push_back(target_.config().num_layers);  // the last layer's output, for the target's logits
  history_ = std::make_unique<TapHistory>(opts, target_.config().hidden, proposer_taps_, taps_.size());
}

void EngineCore::swap_draft(std::shared_ptr<const ServedDraft> draft, int version) {
  EAGLET_CHECK(draft && served_ && proposer_, "a draft swap needs an engine serving a draft model");
  served_->check_replaceable_by(*draft);
  auto next = draft->new_proposer(opts_.kv_blocks, pool_);
  for (auto& s : running_) {
    if (!s->proposing) continue;
    if (history_) {
      next->begin(s->kv, history_->tokens(s->kv), history_->draft_taps(s->kv), s->last);
    } else {
      s->proposing = false;  // no history to rebuild from: plain decoding from here on
    }
  }
  proposer_ = std::move(next);
  served_ = std::move(draft);  // after the old proposer, which read the previous one
  draft_version_ = version;
  if (metrics_) metrics_->set_draft_version(version);
}

EngineCore::~EngineCore() = default;

// The KV cache is allocated up front, so its size is checked against memory first: a model whose
// config claims a 2-billion-token context must fail with advice, not std::bad_alloc.
void EngineCore::size_kv_cache() {
  const int64_t per_seq = kv_blocks_for(int64_t(opts_.max_model_len) + spec_.max_step_tokens());
  size_t block_bytes = target_.kv_shape(1).bytes_per_block();
  if (spec_.enabled()) block_bytes += spec_.draft_block_bytes();
  const bool default_budget = opts_.kv_cache_bytes <= 0;
  const int64_t budget = default_budget ? available_memory_bytes() / 2 : opts_.kv_cache_bytes;
  const int64_t fit = budget > 0 ? budget / int64_t(block_bytes) : per_seq * opts_.max_num_seqs;
  const double gb = 1e-9, seq_gb = double(per_seq) * double(block_bytes) * gb;
  const std::string budget_name = default_budget ? "half the memory available; --kv-cache-memory sets it" : "--kv-cache-memory";
  if (fit < per_seq)
    fail("max_model_len {} needs {:.3g} GB of KV cache for one sequence, more than the {:.3g} GB KV cache budget ({}): "
         "pass --max-model-len {} or less", opts_.max_model_len, seq_gb, double(budget) * gb, budget_name,
         std::max<int64_t>(0, fit - 1) * 16 - spec_.max_step_tokens());
  if (opts_.kv_blocks <= 0) {
    opts_.kv_blocks = std::min(per_seq * opts_.max_num_seqs, fit);
  } else {
    EAGLET_CHECK(opts_.kv_blocks >= per_seq, "--kv-blocks {} cannot hold one sequence of max_model_len {} ({} blocks)",
                 opts_.kv_blocks, opts_.max_model_len, per_seq);
    EAGLET_CHECK(opts_.kv_blocks <= fit, "--kv-blocks {} needs {:.3g} GB, more than the {:.3g} GB KV cache budget ({})",
                 opts_.kv_blocks, double(opts_.kv_blocks) * double(block_bytes) * gb, double(budget) * gb, budget_name);
  }
  spdlog::debug("KV cache: {} blocks of 16 tokens ({:.3g} GB), room for {} sequences of max_model_len {}",
                opts_.kv_blocks, double(opts_.kv_blocks) * double(block_bytes) * gb, opts_.kv_blocks / per_seq,
                opts_.max_model_len);
}

double EngineCore::kv_usage() const {
  return 1.0 - double(cache_->free_blocks()) / double(cache_->total_blocks());
}

bool EngineCore::try_add(std::shared_ptr<Request> r) {
  const int64_t tokens = std::min<int64_t>(int64_t(r->prompt.size()) + r->stop.max_tokens, opts_.max_model_len);
  const int64_t need = kv_blocks_for(tokens + spec_.max_step_tokens());
  EAGLET_CHECK(need <= opts_.kv_blocks, "a request of {} tokens needs {} KV blocks; the cache has {}", tokens, need,
               opts_.kv_blocks);
  EAGLET_CHECK(!r->prompt.empty(), "empty prompt");
  if (int(running_.size()) >= opts_.max_num_seqs || reserved_blocks_ + need > opts_.kv_blocks) return false;
  auto s = std::make_unique<Seq>(std::move(r), tok_);
  s->sampler.set_prompt(s->req->prompt);
  s->kv = cache_->create();
  if (history_) history_->admit(s->kv, *s->req);
  s->blocks = need;
  if (policy_) s->policy = policy_->new_sequence();
  reserved_blocks_ += need;
  follow_same_prompt(*s);
  running_.push_back(std::move(s));
  return true;
}

// A new sequence whose prompt a running one is still prefilling waits for that prefill instead of
// running its own. Not for prompt log-probabilities (scored per sequence) or with the tap history
// kept for online training (each sequence records its own).
void EngineCore::follow_same_prompt(Seq& s) {
  auto shareable = [&](const Seq& x) {
    return x.req->prompt_logprobs < 0 && x.req->stop.max_tokens > 0;
  };
  if (history_ || !shareable(s)) return;
  for (auto& l : running_)
    if (!l->leader && !l->decoding && shareable(*l) && l->req->prompt == s.req->prompt) {
      s.leader = l.get();
      l->followers.push_back(&s);
      return;
    }
}

void EngineCore::abort_all(const std::string& reason) {
  for (auto& s : running_) finish(*s, reason);
  running_.clear();
}

void EngineCore::record_rows(Seq& s, const int* tokens, const float* taps, size_t n) {
  const size_t H = size_t(target_.config().hidden), row = taps_.size() * H, aux = proposer_taps_ * H;
  if (aux && !s.decoding)
    for (size_t i = 0; i < n; ++i) s.prompt_taps.insert(s.prompt_taps.end(), taps + i * row, taps + i * row + aux);
  if (history_) history_->record(s.kv, tokens, taps, n);
}

void EngineCore::finish(Seq& s, const std::string& reason) {
  if (s.leader) std::erase(s.leader->followers, &s);
  if (!s.followers.empty()) {  // its prompt is not in yet: the first follower prefills it for the rest
    Seq* next = s.followers[0];
    next->leader = nullptr;
    next->followers.assign(s.followers.begin() + 1, s.followers.end());
    for (Seq* f : next->followers) f->leader = next;
    s.followers.clear();
  }
  if (history_) history_->finish(s.kv, *s.req, reason, draft_version_);
  cache_->free(s.kv);
  if (s.proposing) proposer_->end(s.kv);
  reserved_blocks_ -= s.blocks;
  if (metrics_) {
    RequestTimes t;
    t.arrival = s.req->arrival;
    t.scheduled = s.scheduled;
    t.first_token = s.first_token;
    t.has_first_token = s.emitted_tokens > 0;
    t.finished = clock_type::now();
    t.prompt_tokens = int64_t(s.req->prompt.size());
    t.generation_tokens = int64_t(s.tracker.tokens().size());
    metrics_->request_finished(reason, t);
    if (s.req->sampling.constrained())
      metrics_->structured_output(s.sampler.masks(), s.sampler.mask_seconds(), s.sampler.refused_drafts());
  }
  const std::string rest = s.tracker.take_new_text();
  if ((!rest.empty() || !s.pending.empty()) && s.req->on_output) s.req->on_output(rest, s.pending);
  s.pending.clear();
  if (s.req->on_finish) s.req->on_finish(reason, int(s.tracker.tokens().size()));
}

bool EngineCore::emit(Seq& s, int token, const float* logits_row) {
  bool more = s.tracker.append(token);
  s.sampler.accept(token);
  // A grammar that allows nothing more ends the output as end-of-sequence would (even with
  // ignore_eos: the only token left is end-of-sequence).
  if (more && s.sampler.grammar_finished()) more = s.tracker.stop();
  const auto now = clock_type::now();
  if (metrics_) {
    if (s.emitted_tokens == 0) {
      s.first_token = now;
      metrics_->time_to_first_token(since(s.req->arrival));
    }
    else metrics_->inter_token_latency(std::chrono::duration<double>(now - s.last_token_time).count());
    metrics_->tokens(0, 1);
  }
  s.last_token_time = now;
  ++s.emitted_tokens;
  s.pending.push_back(s.req->top_logprobs >= 0
                          ? logprob_of(logits_row, target_.config().vocab, token, s.req->top_logprobs)
                          : TokenLogprob{token, 0, {}});
  if (more && s.req->on_output) {  // a finishing sequence sends its last text from finish()
    const std::string text = s.tracker.take_new_text();
    if (!text.empty() || !s.pending.empty()) {
      s.req->on_output(text, s.pending);
      s.pending.clear();
    }
  }
  return more;
}

// Draft trees for every decoding sequence: one batched proposer call, then the policy's trim.
void EngineCore::draft(const std::vector<Seq*>& all_decoding, int fixed_tokens) {
  for (Seq* s : all_decoding) s->tree = {};
  std::vector<Seq*> decoding;  // the sequences the proposer follows
  for (Seq* s : all_decoding)
    if (s->proposing) decoding.push_back(s);
  if (!proposer_ || decoding.empty() || !policy_->worth_drafting(int(decoding.size()), fixed_tokens)) return;
  std::vector<Proposer::Request> requests;
  std::vector<DraftPolicy::SeqState*> states;
  for (Seq* s : decoding) {
    const int remaining = s->req->stop.max_tokens - int(s->tracker.tokens().size());
    const int64_t room = opts_.max_model_len - cache_->length(s->kv) - 1;
    const int cap = int(std::max<int64_t>(0, std::min<int64_t>(remaining - 1, room)));
    Proposer::Request r{s->kv, policy_->shape(s->policy, cap)};
    if (spec_.options().constrain_draft && s->sampler.matcher()) {  // structured output: draft what it allows
      r.grammar = s->sampler.matcher();
      r.vocabulary = s->req->sampling.vocabulary.get();
    }
    requests.push_back(r);
    states.push_back(&s->policy);
  }
  const auto t0 = clock_type::now();
  std::vector<DraftTree> trees;
  proposer_->propose(requests, &trees);
  const double seconds = since(t0);
  spec_metrics_.draft_seconds += seconds;
  int levels = 0;  // draft forwards: one per level, or one for a whole block
  for (auto& r : requests) levels = std::max(levels, policy_->config().whole_block ? 1 : r.shape.depth);
  policy_->trim(trees, states, fixed_tokens, seconds, levels);
  for (size_t i = 0; i < decoding.size(); ++i) {
    decoding[i]->tree = std::move(trees[i]);
    decoding[i]->tree.truncate(requests[i].shape.budget);
    if (decoding[i]->tree.size() < spec_.options().draft_min) decoding[i]->tree = {};
  }
}

// What one step runs, in batch order: each scheduled sequence with the prompt tokens it prefills
// (0: it decodes its root token and draft tree).
struct EngineCore::StepPlan {
  std::vector<Seq*> seqs;
  std::vector<size_t> prefill;
};

void EngineCore::step() {
  drop_cancelled();
  if (running_.empty()) return;
  const StepPlan p = plan();
  execute(p);
  apply(p);
  retire_finished();
}

// Cancelled requests (client gone) leave first and free their blocks.
void EngineCore::drop_cancelled() {
  for (auto& s : running_)
    if (s->req->cancelled) {
      finish(*s, "abort");
      s.reset();
    }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
}

// Every decoding sequence, and prefill chunks within the token budget; then their drafts.
EngineCore::StepPlan EngineCore::plan() {
  StepPlan p;
  std::vector<Seq*> decoding;
  int budget = opts_.prefill_chunk, fixed_tokens = 0;
  for (auto& sp : running_) {
    Seq& s = *sp;
    if (s.leader) continue;  // waits for its leader's prefill
    if (s.decoding) {
      decoding.push_back(&s);
      p.seqs.push_back(&s);
      p.prefill.push_back(0);
      ++fixed_tokens;
    } else if (budget > 0) {
      const size_t n = std::min<size_t>(size_t(budget), s.req->prompt.size() - s.prefilled);
      p.seqs.push_back(&s);
      p.prefill.push_back(n);
      budget -= int(n);
      fixed_tokens += int(n);
    }
  }
  draft(decoding, fixed_tokens);
  return p;
}

// One target forward: each decoding sequence's root and draft tree, each prefill chunk.
void EngineCore::execute(const StepPlan& p) {
  batch_.tap_layers = taps_;
  batch_.chunks.resize(p.seqs.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < p.seqs.size(); ++i) {
    fill_chunk(*p.seqs[i], p.prefill[i], batch_.chunks[i]);
    tokens += int64_t(batch_.chunks[i].tokens.size());
  }
  const auto t0 = clock_type::now();
  target_.forward(pool_, *cache_, batch_, &out_);
  spec_metrics_.target_seconds += since(t0);
  if (metrics_) metrics_->iteration(tokens);
}

// A decoding sequence scores its root and every tree node; a prefill chunk scores its last
// prompt token (or every one, for prompt log-probabilities).
void EngineCore::fill_chunk(const Seq& s, size_t prefill_tokens, SeqChunk& c) const {
  c.seq = s.kv;
  c.tokens.clear();
  c.logit_rows.clear();
  c.parents.clear();
  if (s.decoding) {
    c.tokens.push_back(s.last);
    c.tokens.insert(c.tokens.end(), s.tree.tokens.begin(), s.tree.tokens.end());
    for (size_t r = 0; r < c.tokens.size(); ++r) c.logit_rows.push_back(int(r));
    if (!is_chain(s.tree)) {
      c.parents.push_back(-1);
      for (int parent : s.tree.parents) c.parents.push_back(parent + 1);
    }
    return;
  }
  const auto& prompt = s.req->prompt;
  c.tokens.assign(prompt.begin() + long(s.prefilled), prompt.begin() + long(s.prefilled + prefill_tokens));
  if (s.req->prompt_logprobs >= 0) {
    for (size_t r = 0; r < prefill_tokens; ++r) c.logit_rows.push_back(int(r));
  } else if (s.prefilled + prefill_tokens == prompt.size()) {
    c.logit_rows.push_back(int(prefill_tokens) - 1);
  }
}

// The forward's rows back into each sequence: prefill progress, or verification and emission;
// then one batched proposer call folds every accepted path into the draft's state.
void EngineCore::apply(const StepPlan& p) {
  const auto t0 = clock_type::now();
  const size_t V = size_t(target_.config().vocab), tap_row = taps_.size() * size_t(target_.config().hidden);
  accepted_.clear();
  accepted_taps_.resize(std::max(accepted_taps_.size(), p.seqs.size()));  // accepted_ points into these
  size_t row = 0, tok = 0;
  for (size_t i = 0; i < p.seqs.size(); ++i) {
    Seq& s = *p.seqs[i];
    const SeqChunk& c = batch_.chunks[i];
    const float* taps = out_.taps.data() + tok * tap_row;
    tok += c.tokens.size();
    if (p.prefill[i] > 0) {
      row += apply_prefill(s, c, taps, row);
    } else {
      apply_decode(s, c, out_.logits.data() + row * V, taps, accepted_taps_[i]);
      row += c.tokens.size();
    }
  }
  if (proposer_ && !accepted_.empty()) proposer_->accept(accepted_);
  spec_metrics_.verify_seconds += since(t0);
}

// A prefill chunk's rows (logits from `row` on): taps recorded, prompt log-probabilities, and
// once the prompt is in, the first token. Returns the logits rows it used.
size_t EngineCore::apply_prefill(Seq& s, const SeqChunk& c, const float* taps, size_t row) {
  const int V = target_.config().vocab;
  const size_t first = s.prefilled, n = c.tokens.size(), row0 = row;
  s.prefilled += n;
  if (!taps_.empty()) record_rows(s, c.tokens.data(), taps, n);
  if (metrics_) metrics_->tokens(int64_t(n), 0);
  const auto& prompt = s.req->prompt;
  const bool prefilled = s.prefilled == prompt.size();
  if (s.req->prompt_logprobs >= 0) {  // row r scores the prompt token after it
    for (size_t r = 0; r < n && first + r + 1 < prompt.size(); ++r)
      s.prompt_logprobs.push_back(
          logprob_of(out_.logits.data() + (row + r) * size_t(V), V, prompt[first + r + 1], s.req->prompt_logprobs));
    row += n - (prefilled ? 1 : 0);  // the last row is the first sampling row
    if (prefilled && s.req->on_prompt_logprobs) s.req->on_prompt_logprobs(std::move(s.prompt_logprobs));
  }
  if (!prefilled) return row - row0;
  const float* logits = out_.logits.data() + row * size_t(V);
  for (Seq* f : s.followers) {  // before the leader's taps are let go
    cache_->free(f->kv);
    f->kv = cache_->fork(s.kv);
    f->prefilled = s.prefilled;
    f->prompt_taps = s.prompt_taps;
    f->leader = nullptr;
    start_decoding(*f, logits);
  }
  s.followers.clear();
  start_decoding(s, logits);
  return row + 1 - row0;
}

// The prompt is in: its first token is sampled from the last prompt row's logits.
void EngineCore::start_decoding(Seq& s, const float* logits) {
  if (s.req->stop.max_tokens == 0) {
    s.prompt_only = true;
    return;
  }
  s.last = s.sampler.sample(logits, target_.config().vocab);
  s.decoding = true;
  if (!emit(s, s.last, logits)) return;
  // Penalties and biases change each position's distribution with the tokens before it,
  // which a draft's verification does not model: such sequences decode without drafts.
  if (proposer_ && !s.req->sampling.has_logits_processors()) {
    proposer_->begin(s.kv, s.req->prompt, taps_.empty() ? nullptr : s.prompt_taps.data(), s.last);
    s.proposing = true;
  }
  s.prompt_taps = {};
}

// A decoding sequence's rows: its tree verified, the root and accepted path kept in the KV cache
// (their rows move into place), the path and the next token emitted, and what the proposer must
// fold in queued in accepted_ (its taps copied into `accepted_taps`).
void EngineCore::apply_decode(Seq& s, const SeqChunk& c, const float* logits, const float* taps,
                              std::vector<float>& accepted_taps) {
  const size_t V = size_t(target_.config().vocab), tap_row = taps_.size() * size_t(target_.config().hidden);
  const int64_t len_before = cache_->length(s.kv) - int64_t(c.tokens.size());
  const Verdict v = verify_tree(logits, int(V), s.tree, s.sampler);
  observe_verdict(s, v);
  std::vector<int64_t> rows;
  for (int p : v.path) rows.push_back(len_before + 1 + p);
  cache_->keep_rows(s.kv, len_before + 1, rows);
  if (history_) {  // the root's and the accepted path's rows join the history
    record_rows(s, &c.tokens[0], taps, 1);
    for (int p : v.path) record_rows(s, &c.tokens[size_t(1 + p)], taps + size_t(1 + p) * tap_row, 1);
  }
  size_t parent_row = 0;  // logits of a token come from its parent's row
  for (int p : v.path) {
    if (!emit(s, s.tree.tokens[size_t(p)], logits + parent_row * V)) return;
    parent_row = size_t(1 + p);
  }
  if (!emit(s, v.next, logits + parent_row * V)) return;
  s.last = v.next;
  if (!s.proposing) return;
  const size_t aux = proposer_taps_ * size_t(target_.config().hidden);  // the proposer's share of a row
  auto take = [&](size_t r) { accepted_taps.insert(accepted_taps.end(), taps + r * tap_row, taps + r * tap_row + aux); };
  Proposer::Accepted a{s.kv, {}, nullptr};
  accepted_taps.clear();
  take(0);
  for (int p : v.path) {
    a.tokens.push_back(s.tree.tokens[size_t(p)]);
    take(size_t(1 + p));
  }
  a.tokens.push_back(v.next);
  a.taps = accepted_taps.data();
  accepted_.push_back(std::move(a));
}

// Acceptance counters and the draft policy's statistics, for a step that had a draft tree.
void EngineCore::observe_verdict(Seq& s, const Verdict& v) {
  if (s.tree.empty()) return;
  const auto depths = s.tree.depths();
  const int depth = *std::max_element(depths.begin(), depths.end());
  spec_metrics_.record(s.tree.size(), v.accepted(), depth);
  if (metrics_) metrics_->spec_step(s.tree.size(), v.accepted(), depth);
  policy_->observe(s.policy, s.tree, v.path);
}

// Sequences that stopped, ran out of tokens or filled max_model_len finish and leave.
void EngineCore::retire_finished() {
  for (auto& sp : running_) {
    Seq& s = *sp;
    const bool full = cache_->length(s.kv) + 1 >= opts_.max_model_len;
    if (s.prompt_only || s.tracker.finished() || (s.decoding && full)) {
      finish(s, s.tracker.finished() ? s.tracker.finish_reason() : "length");
      sp.reset();
    }
  }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
}

}  // namespace eaglet
