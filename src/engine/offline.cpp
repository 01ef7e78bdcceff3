#include "engine/offline.h"

#include <algorithm>

#include "core/error.h"
#include "models/prefill.h"
#include "speculation/spec_setup.h"

namespace eaglet {

OfflineEngine::OfflineEngine(ThreadPool& pool, Model& model, const Tokenizer& tok, const SpecSetup* spec,
                             int64_t longest, int max_seqs, int prefill_chunk) {
  if (!spec) spec = (plain_ = std::make_unique<SpecSetup>(SpecOptions{}, model)).get();
  EngineOptions o;
  o.max_num_seqs = max_seqs;
  o.prefill_chunk = prefill_chunk;
  o.max_model_len = int(std::min<int64_t>(longest + 1, model.config().max_position));
  o.kv_blocks = int64_t(max_seqs) * kv_blocks_for(o.max_model_len + spec->max_step_tokens());
  core_ = std::make_unique<EngineCore>(pool, model, tok, *spec, o);
}

OfflineEngine::~OfflineEngine() = default;

void OfflineEngine::run_all(const std::vector<std::shared_ptr<Request>>& requests) {
  size_t next = 0;
  while (next < requests.size() || core_->has_work()) {
    while (next < requests.size() && core_->try_add(requests[next])) ++next;
    EAGLET_CHECK(core_->has_work(), "request {} of {} tokens does not fit an idle engine of max_model_len {}", next,
                 requests[next]->prompt.size(), core_->options().max_model_len);
    core_->step();
  }
}

GenerationResult OfflineEngine::run(const std::shared_ptr<Request>& r) { return run_request(*core_, r); }

}  // namespace eaglet
