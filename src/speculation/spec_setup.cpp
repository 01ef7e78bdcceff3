#include "speculation/spec_setup.h"

#include <fmt/format.h>

#include <functional>

#include "core/error.h"
#include "core/thread_pool.h"
#include "models/attention.h"
#include "speculation/eagle3_proposer.h"
#include "speculation/ngram_proposer.h"

namespace eaglet {

namespace {
// The proposer registry: a new proposer is one file and one line here.
struct ProposerEntry {
  std::string name;
  bool needs_draft;  // an EAGLE-3 draft directory (--draft)
  bool trees;        // drafts token trees
  ProposerFactory make;
};
std::vector<ProposerEntry>& registry() {
  static std::vector<ProposerEntry> r{
      {"eagle3", true, true,
       [](const SpecSetup& s, int64_t blocks, ThreadPool& pool) {
         return std::make_unique<Eagle3Proposer>(*s.draft(), blocks, pool);
       }},
      {"ngram", false, false,
       [](const SpecSetup& s, int64_t, ThreadPool&) {
         return std::make_unique<NgramProposer>(s.options().ngram_max, s.options().ngram_min);
       }},
  };
  return r;
}
const ProposerEntry* find_entry(const std::string& name) {
  for (auto& e : registry())
    if (name == e.name) return &e;
  return nullptr;
}
}  // namespace

void SpecSetup::register_proposer(const std::string& name, bool needs_draft, bool trees, ProposerFactory make) {
  EAGLET_CHECK(!find_entry(name) && name != "none", "proposer '{}' is registered twice", name);
  registry().push_back({name, needs_draft, trees, std::move(make)});
}

std::vector<std::string> SpecSetup::methods() {
  std::vector<std::string> m;
  for (auto& e : registry()) m.push_back(e.name);
  m.push_back("none");
  return m;
}

SpecSetup::SpecSetup(const SpecOptions& opts, const Model& target) : opts_(opts) {
  const int k = opts.num_speculative_tokens;
  EAGLET_CHECK(k >= -1 && k <= 16, "--num-speculative-tokens must be in [0, 16] (got {})", k);
  method_ = opts.method.empty() ? (opts.draft_dir.empty() ? "none" : "eagle3") : opts.method;
  const ProposerEntry* entry = find_entry(method_);
  if (!entry && method_ != "none")
    fail("--spec-method must be one of {} (got '{}')", fmt::join(methods(), ", "), method_);
  if (opts.aux_numbering != "input" && opts.aux_numbering != "output")
    fail("--aux-numbering must be 'input' or 'output' (got '{}')", opts.aux_numbering);
  const std::string shape = opts.draft_shape.empty() ? (k >= 0 ? "chain" : "auto") : opts.draft_shape;
  policy_ = parse_draft_shape(shape, k >= 0 ? k : 3);
  if (entry && entry->needs_draft) {
    EAGLET_CHECK(!opts.draft_dir.empty(), "--spec-method {} needs --draft DIR", method_);
    draft_ = Eagle3Draft::load(opts.draft_dir, target,
                               opts.aux_numbering == "output" ? AuxNumbering::Output : AuxNumbering::Input);
  }
  // Chain-only proposers (n-gram) and targets without tree attention (MiniMax MSA) draft chains.
  const bool trees = entry && entry->trees && target.supports_token_trees();
  if (!trees && !policy_.shape.is_chain()) {
    policy_.shape.topk = 1;
    policy_.shape.budget = policy_.shape.depth;
  }
}

int SpecSetup::max_step_tokens() const {
  if (!enabled()) return 1;
  const TreeShape& s = policy_.shape;
  return 1 + std::max(s.budget, (s.depth - 1) * s.topk);
}

std::unique_ptr<Proposer> SpecSetup::new_proposer(int64_t draft_blocks, ThreadPool& pool) const {
  if (!enabled()) return nullptr;
  return find_entry(method_)->make(*this, draft_blocks, pool);
}

size_t SpecSetup::draft_block_bytes() const { return draft_ ? draft_->kv_shape(1).bytes_per_block() : 0; }

std::unique_ptr<DraftPolicy> SpecSetup::new_policy(ThreadPool& pool, Model& target, bool scored) const {
  if (!policy_.adaptive) return std::make_unique<DraftPolicy>(policy_, nullptr, scored);
  std::shared_ptr<const CostModel> cost = cost_;
  if (!cost) {
    auto& m = measured_[pool.size()];
    if (!m) m = std::make_shared<const CostModel>(CostModel::for_target(pool, target, opts_.cost_model_cache));
    cost = m;
  }
  return std::make_unique<DraftPolicy>(policy_, cost, scored);
}

std::string SpecSetup::describe() const {
  if (!enabled()) return "no speculation";
  const TreeShape& s = policy_.shape;
  const std::string shape = policy_.adaptive
                                ? fmt::format("auto (cost model; up to topk {}, depth {}, {} nodes)", s.topk, s.depth, s.budget)
                            : s.is_chain() ? fmt::format("chain k={}", s.depth)
                                           : fmt::format("tree topk={}, depth={}, budget={}", s.topk, s.depth, s.budget);
  if (method_ == "ngram") return fmt::format("n-gram prompt lookup (n {}..{}), {}", opts_.ngram_min, opts_.ngram_max, shape);
  if (!draft_) return fmt::format("{}, {}", method_, shape);
  return fmt::format("EAGLE-3 draft {} ({}, draft vocab {}, taps {},{},{})", opts_.draft_dir, shape,
                     draft_->config().draft_vocab, draft_->config().aux_layers[0], draft_->config().aux_layers[1],
                     draft_->config().aux_layers[2]);
}

}  // namespace eaglet
