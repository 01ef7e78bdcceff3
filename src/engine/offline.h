// The offline driver: an engine core sized for a known set of requests, run to completion on the
// calling thread. `generate`, `bench`, `regen`, `demo` and the tests drive the engine through it;
// the server's scheduler (runtime/) is the one online driver.
#pragma once
#include <memory>
#include <vector>

#include "engine/engine_core.h"
#include "engine/generator.h"

namespace eaglet {

class OfflineEngine {
 public:
  // Room for `max_seqs` sequences of up to `longest` tokens each (prompt plus generation), with a
  // speculative step's slack: not the model's whole context, which configs put in the millions.
  // `spec` null: plain decoding.
  OfflineEngine(ThreadPool& pool, Model& model, const Tokenizer& tok, const SpecSetup* spec, int64_t longest,
                int max_seqs = 1, int prefill_chunk = 512);
  ~OfflineEngine();

  // Runs `requests` to completion, admitting them in order as sequence slots and KV blocks free up;
  // their callbacks report tokens and finishing.
  void run_all(const std::vector<std::shared_ptr<Request>>& requests);
  // One request on the idle engine, with its tokens, text and timings.
  GenerationResult run(const std::shared_ptr<Request>& r);
  EngineCore& core() { return *core_; }

 private:
  std::unique_ptr<SpecSetup> plain_;  // the plain-decoding setup when none is given
  std::unique_ptr<EngineCore> core_;
};

}  // namespace eaglet
