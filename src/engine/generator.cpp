#include "engine/generator.h"

#include <chrono>

#include "core/error.h"
#include "engine/engine_core.h"

namespace eaglet {

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

GenerationResult run_request(EngineCore& engine, const GenerationRequest& req) {
  validate(req.sampling);
  EAGLET_CHECK(!req.prompt_ids.empty(), "empty prompt");
  if (int64_t(req.prompt_ids.size()) >= engine.options().max_model_len)
    fail("prompt of {} tokens does not fit the model's context of {} tokens", req.prompt_ids.size(),
         engine.options().max_model_len);
  GenerationResult res;
  res.prompt_ids = req.prompt_ids;
  res.stats.prompt_tokens = int64_t(req.prompt_ids.size());
  auto r = std::make_shared<Request>();
  r->prompt = req.prompt_ids;
  r->sampling = req.sampling;
  r->stop = req.stop;
  const double start = monotonic_seconds();
  double first = 0, last = 0;
  r->on_output = [&](const std::string& text, const std::vector<TokenLogprob>& tokens) {
    const double now = monotonic_seconds();
    for (auto& t : tokens) {
      if (first == 0) first = now;
      else res.stats.inter_token_seconds.push_back(now - last);
      last = now;
      res.token_ids.push_back(t.token);
    }
    res.text += text;
    if (req.on_text && !text.empty()) req.on_text(text);
  };
  bool done = false;
  r->on_finish = [&](const std::string& reason, int) {
    res.finish_reason = reason;
    done = true;
  };
  EAGLET_CHECK(engine.try_add(r), "the engine has no room for the request");
  while (!done) engine.step();
  const double end = monotonic_seconds();
  if (first == 0) first = end;
  res.stats.prefill_seconds = first - start;
  res.stats.decode_seconds = end - first;
  res.stats.generated_tokens = int64_t(res.token_ids.size());
  return res;
}

GenerationResult generate(ThreadPool& pool, Model& model, const Tokenizer& tok, const GenerationRequest& req, const SpecSetup* spec,
                          SpecMetrics* metrics) {
  std::unique_ptr<SpecSetup> none;
  if (!spec) spec = (none = std::make_unique<SpecSetup>(SpecOptions{}, model)).get();
  EngineOptions o;
  o.max_num_seqs = 1;
  o.prefill_chunk = req.prefill_chunk;
  const int64_t tokens =
      std::min<int64_t>(int64_t(req.prompt_ids.size()) + req.stop.max_tokens, model.config().max_position);
  o.max_model_len = int(std::min<int64_t>(tokens + 1, model.config().max_position));
  o.kv_blocks = kv_blocks_for(o.max_model_len + spec->max_step_tokens());
  EngineCore engine(pool, model, tok, *spec, o);
  GenerationResult res = run_request(engine, req);
  if (metrics) metrics->merge(engine.spec_metrics());
  return res;
}

}  // namespace eaglet
