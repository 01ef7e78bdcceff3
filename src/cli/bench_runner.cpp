#include "cli/bench_runner.h"

#include <algorithm>
#include <chrono>

#include "cli/report.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "engine/offline.h"

namespace eaglet::cli {

// A one-token step versus a pass over `verify_tokens` tokens (a tree when `parents` is given).
static VerifyCost measure_pass_cost(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int verify_tokens,
                                    const std::vector<int>& parents, int reps);

VerifyCost measure_verify_cost(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int verify_tokens, int reps) {
  return measure_pass_cost(pool, b, prompt, verify_tokens, {}, reps);
}

VerifyCost measure_tree_verify_cost(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int reps) {
  std::vector<int> parents = {-1, 0, 0, 0, 0};
  for (int c = 1; c <= 4; ++c)
    for (int g = 0; g < 3; ++g) parents.push_back(c);
  return measure_pass_cost(pool, b, prompt, int(parents.size()), parents, reps);
}

static VerifyCost measure_pass_cost(ThreadPool& pool, ModelBundle& b, const std::vector<int>& prompt, int verify_tokens,
                             const std::vector<int>& parents, int reps) {
  VerifyCost c;
  c.verify_tokens = verify_tokens;
  const int64_t n = int64_t(prompt.size());
  KvCache cache(b.model->kv_shape(kv_blocks_for(n + verify_tokens)));
  const SeqId seq = cache.create();
  prefill(pool, *b.model, cache, seq, prompt, 512);
  auto time_pass = [&](int tokens) {
    PassCost p;
    ForwardBatch batch;
    SeqChunk chunk{seq, {}, {}};
    if (tokens > 1) chunk.parents = parents;
    for (int i = 0; i < tokens; ++i) {
      chunk.tokens.push_back(prompt[size_t(i) % prompt.size()]);
      chunk.logit_rows.push_back(i);
    }
    batch.chunks.push_back(chunk);
    ForwardOutput out;
    std::vector<double> seconds;
    for (int r = 0; r <= reps; ++r) {  // the first pass warms caches and is not counted
      const auto t0 = std::chrono::steady_clock::now();
      b.model->forward(pool, cache, batch, &out);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      cache.truncate(seq, n);
      if (r > 0) seconds.push_back(s);
    }
    // The median pass: on a shared VM one pass in a few can stall for tens of milliseconds.
    p.seconds = percentile(seconds, 0.5);
    p.weight_gb = double(out.weight_bytes_read) / 1e9;
    p.experts_touched = out.experts_touched;
    return p;
  };
  c.step = time_pass(1);
  c.verify = time_pass(verify_tokens);
  return c;
}

RunTotals run_prompts(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts, int max_tokens,
                      const SamplingParams& sampling, bool ignore_eos, const SpecSetup* spec,
                      const std::function<void(double decode_seconds)>& after_prompt) {
  RunTotals t;
  // One engine for all prompts, as a server at concurrency 1: the draft policy's acceptance
  // statistics carry over from prompt to prompt.
  int64_t longest = 0;
  for (auto& ids : prompts) longest = std::max<int64_t>(longest, int64_t(ids.size()) + max_tokens);
  OfflineEngine engine(pool, *b.model, b.tokenizer, spec, longest);
  for (auto& ids : prompts) {
    auto req = std::make_shared<Request>();
    req->prompt = ids;
    req->sampling = sampling;
    req->stop.max_tokens = max_tokens;
    req->stop.stop_tokens = b.eos_ids;
    req->stop.ignore_eos = ignore_eos;
    const GenerationResult r = engine.run(req);
    t.tokens += std::max<int64_t>(0, r.stats.generated_tokens - 1);
    t.seconds += r.stats.decode_seconds;
    t.inter_token_seconds.insert(t.inter_token_seconds.end(), r.stats.inter_token_seconds.begin(),
                                 r.stats.inter_token_seconds.end());
    t.outputs.push_back(r.token_ids);
    if (after_prompt) after_prompt(r.stats.decode_seconds);
  }
  t.spec = engine.core().spec_metrics();
  return t;
}

RunTotals run_prompts_batched(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts,
                              int max_tokens, const SamplingParams& sampling, bool ignore_eos, const SpecSetup* spec,
                              int max_seqs) {
  RunTotals t;
  int64_t longest = 0;
  for (auto& ids : prompts) longest = std::max<int64_t>(longest, int64_t(ids.size()) + max_tokens);
  OfflineEngine engine(pool, *b.model, b.tokenizer, spec, longest, max_seqs);
  t.outputs.resize(prompts.size());
  std::vector<std::shared_ptr<Request>> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto req = std::make_shared<Request>();
    req->prompt = prompts[i];
    req->sampling = sampling;
    req->stop.max_tokens = max_tokens;
    req->stop.stop_tokens = b.eos_ids;
    req->stop.ignore_eos = ignore_eos;
    std::vector<int>& out = t.outputs[i];
    req->on_output = [&out](const std::string&, const std::vector<TokenLogprob>& tokens) {
      for (const TokenLogprob& tl : tokens) out.push_back(tl.token);
    };
    requests.push_back(std::move(req));
  }
  const auto t0 = std::chrono::steady_clock::now();
  engine.run_all(requests);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& out : t.outputs) t.tokens += int64_t(out.size());
  t.spec = engine.core().spec_metrics();
  return t;
}

ProbedBaseline run_baseline_with_probes(ThreadPool& pool, ModelBundle& b, const std::vector<std::vector<int>>& prompts, int max_tokens,
                                        const SamplingParams& sampling, bool ignore_eos, bool probe) {
  ProbedBaseline r;
  auto take_probe = [&] {
    r.probes.push_back(measure_memory_bandwidth(pool));
    r.best.read_gbps = std::max(r.best.read_gbps, r.probes.back().read_gbps);
    r.best.copy_gbps = std::max(r.best.copy_gbps, r.probes.back().copy_gbps);
  };
  if (probe) take_probe();
  double read_seconds = 0, copy_seconds = 0;  // bandwidth x decode seconds, summed over prompts
  r.totals = run_prompts(pool, b, prompts, max_tokens, sampling, ignore_eos, nullptr, [&](double seconds) {
    if (!probe) return;
    take_probe();
    const MemoryBandwidth& before = r.probes[r.probes.size() - 2];
    const MemoryBandwidth& after = r.probes.back();
    read_seconds += seconds * std::max(before.read_gbps, after.read_gbps);
    copy_seconds += seconds * std::max(before.copy_gbps, after.copy_gbps);
  });
  if (probe && r.totals.seconds > 0) {
    r.nearby.read_gbps = read_seconds / r.totals.seconds;
    r.nearby.copy_gbps = copy_seconds / r.totals.seconds;
  }
  return r;
}

}  // namespace eaglet::cli
