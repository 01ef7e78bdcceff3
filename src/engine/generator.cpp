#include "engine/generator.h"

#include <chrono>

#include "core/error.h"
#include "engine/offline.h"

namespace eaglet {

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {
// Puts a request's own callbacks back when run_request returns (or throws): a caller may run the
// same request again.
struct KeepCallbacks {
  Request& r;
  decltype(Request::on_output) on_output = r.on_output;
  decltype(Request::on_finish) on_finish = r.on_finish;
  ~KeepCallbacks() {
    r.on_output = std::move(on_output);
    r.on_finish = std::move(on_finish);
  }
};
}  // namespace

GenerationResult run_request(EngineCore& engine, const std::shared_ptr<Request>& r) {
  validate(r->sampling);
  EAGLET_CHECK(!r->prompt.empty(), "empty prompt");
  if (int64_t(r->prompt.size()) >= engine.options().max_model_len)
    fail("prompt of {} tokens does not fit the model's context of {} tokens", r->prompt.size(),
         engine.options().max_model_len);
  GenerationResult res;
  res.prompt_ids = r->prompt;
  res.stats.prompt_tokens = int64_t(r->prompt.size());
  const KeepCallbacks own{*r};
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
    if (own.on_output) own.on_output(text, tokens);
  };
  bool done = false;
  r->on_finish = [&](const std::string& reason, int completion_tokens) {
    res.finish_reason = reason;
    done = true;
    if (own.on_finish) own.on_finish(reason, completion_tokens);
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

GenerationResult generate(ThreadPool& pool, Model& model, const Tokenizer& tok, const std::shared_ptr<Request>& req,
                          const SpecSetup* spec, SpecMetrics* metrics) {
  OfflineEngine engine(pool, model, tok, spec, int64_t(req->prompt.size()) + req->stop.max_tokens);
  GenerationResult res = engine.run(req);
  if (metrics) metrics->merge(engine.core().spec_metrics());
  return res;
}

}  // namespace eaglet
