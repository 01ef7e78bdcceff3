#include "spec/spec_setup.h"

#include <fmt/format.h>

#include "core/error.h"
#include "spec/eagle3_proposer.h"
#include "spec/ngram_proposer.h"

namespace eaglet {

SpecSetup::SpecSetup(const SpecOptions& opts, const Model& target) : k_(opts.num_speculative_tokens), opts_(opts) {
  EAGLET_CHECK(k_ >= 0 && k_ <= 16, "--num-speculative-tokens must be in [0, 16] (got {})", k_);
  method_ = opts.method.empty() ? (opts.draft_dir.empty() ? "none" : "eagle3") : opts.method;
  if (method_ != "eagle3" && method_ != "ngram" && method_ != "none")
    fail("--spec-method must be eagle3, ngram or none (got '{}')", method_);
  if (opts.aux_numbering != "input" && opts.aux_numbering != "output")
    fail("--aux-numbering must be 'input' or 'output' (got '{}')", opts.aux_numbering);
  if (method_ == "eagle3") {
    EAGLET_CHECK(!opts.draft_dir.empty(), "--spec-method eagle3 needs --draft DIR");
    draft_ = Eagle3Draft::load(opts.draft_dir, target,
                               opts.aux_numbering == "output" ? AuxNumbering::Output : AuxNumbering::Input);
  }
}

std::unique_ptr<Proposer> SpecSetup::new_proposer(int max_tokens) const {
  if (method_ == "eagle3") return std::make_unique<Eagle3Proposer>(*draft_, max_tokens);
  if (method_ == "ngram") return std::make_unique<NgramProposer>(opts_.ngram_max, opts_.ngram_min);
  return nullptr;
}

std::string SpecSetup::describe() const {
  if (!enabled()) return "no speculation";
  if (method_ == "ngram") return fmt::format("n-gram prompt lookup (n {}..{}), k={}", opts_.ngram_min, opts_.ngram_max, k_);
  return fmt::format("EAGLE-3 draft {} (k={}, draft vocab {}, taps {},{},{})", opts_.draft_dir, k_,
                     draft_->config().draft_vocab, draft_->config().aux_layers[0], draft_->config().aux_layers[1],
                     draft_->config().aux_layers[2]);
}

}  // namespace eaglet
