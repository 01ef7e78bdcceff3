#include "speculation/spec_setup.h"

#include "io/hf_cache.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <functional>

#include "core/error.h"
#include "core/thread_pool.h"
#include "models/attention.h"
#include "speculation/ngram_proposer.h"

namespace eaglet {

namespace {
// The proposer registry: a new proposer is one file and one line here.
struct ProposerEntry {
  std::string name;
  DraftKind draft;  // the model --draft names
  bool trees;       // drafts token trees
  ProposerFactory make;
};
std::vector<ProposerEntry>& registry() {
  static std::vector<ProposerEntry> r{
      {"eagle3", DraftKind::Eagle3, true,
       [](const SpecSetup& s, int64_t blocks, ThreadPool& pool) { return s.served_draft()->new_proposer(blocks, pool); }},
      {"ngram", DraftKind::None, false,
       [](const SpecSetup& s, int64_t, ThreadPool&) {
         return std::make_unique<NgramProposer>(s.options().ngram_max, s.options().ngram_min);
       }},
      {"dflash", DraftKind::DFlash, true,
       [](const SpecSetup& s, int64_t blocks, ThreadPool& pool) { return s.served_draft()->new_proposer(blocks, pool); }},
  };
  return r;
}
const ProposerEntry* find_entry(const std::string& name) {
  for (auto& e : registry())
    if (name == e.name) return &e;
  return nullptr;
}
}  // namespace

void apply_speculative_config(SpecOptions& o, const std::string& text, const std::string& option) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  EAGLET_CHECK(j.is_object(), "{}: not a JSON object: {}", option, text);
  auto str = [&](const char* key) {
    EAGLET_CHECK(j[key].is_string(), "{}: '{}' must be a string (got {})", option, key, j[key].dump());
    return j[key].get<std::string>();
  };
  auto num = [&](const char* key, int lo, int hi) {
    EAGLET_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() >= lo && j[key].get<int64_t>() <= hi,
                 "{}: '{}' must be an integer in [{}, {}] (got {})", option, key, lo, hi, j[key].dump());
    return j[key].get<int>();
  };
  static const char* kKeys[] = {"method", "model", "num_speculative_tokens", "prompt_lookup_max",
                                "prompt_lookup_min", "draft_tensor_parallel_size", "draft_shape", "aux_numbering",
                                "draft_semantics", "constrain_draft", "quantization"};
  for (auto it = j.begin(); it != j.end(); ++it)
    EAGLET_CHECK(std::find_if(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return it.key() == k; }) !=
                     std::end(kKeys),
                 "{}: unknown key '{}' (known: {})", option, it.key(), fmt::join(kKeys, ", "));
  if (j.contains("method")) {
    const std::string m = str("method");
    EAGLET_CHECK(m == "eagle3" || m == "ngram" || m == "dflash",
                 "{}: method '{}' is not run here (eagle3, dflash or ngram; EAGLE-1/2, Medusa, MTP "
                 "and separate draft models are not supported)", option, m);
    o.method = m;
  }
  if (j.contains("model")) o.draft_dir = str("model");
  if (j.contains("num_speculative_tokens")) o.num_speculative_tokens = num("num_speculative_tokens", 0, 16);
  if (j.contains("prompt_lookup_max")) o.ngram_max = num("prompt_lookup_max", 1, 64);
  if (j.contains("prompt_lookup_min")) o.ngram_min = num("prompt_lookup_min", 1, 64);
  if (j.contains("draft_tensor_parallel_size"))
    num("draft_tensor_parallel_size", 1, 1);  // the draft runs in the target's process, on its threads
  if (j.contains("draft_shape")) o.draft_shape = str("draft_shape");
  if (j.contains("aux_numbering")) o.aux_numbering = str("aux_numbering");
  if (j.contains("draft_semantics")) o.draft_semantics = str("draft_semantics");
  if (j.contains("quantization")) {
    o.draft_quantize = str("quantization");
    parse_quantize_option(o.draft_quantize, option + ": 'quantization'");
  }
  if (j.contains("constrain_draft")) {
    EAGLET_CHECK(j["constrain_draft"].is_boolean(), "{}: 'constrain_draft' must be true or false (got {})", option,
                 j["constrain_draft"].dump());
    o.constrain_draft = j["constrain_draft"].get<bool>();
  }
}

void SpecSetup::register_proposer(const std::string& name, DraftKind draft, bool trees, ProposerFactory make) {
  EAGLET_CHECK(!find_entry(name) && name != "none", "proposer '{}' is registered twice", name);
  registry().push_back({name, draft, trees, std::move(make)});
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
  if (opts.aux_numbering != "auto" && opts.aux_numbering != "input" && opts.aux_numbering != "output")
    fail("--aux-numbering must be 'auto', 'input' or 'output' (got '{}')", opts.aux_numbering);
  parse_draft_semantics(opts.draft_semantics);  // checked before any loading
  draft_quantize();  // likewise (n-gram lookup, which has no draft model, ignores it)
  const std::string shape = opts.draft_shape.empty() ? (k >= 0 ? "chain" : "auto") : opts.draft_shape;
  policy_ = parse_draft_shape(shape, k >= 0 ? k : 3);
  if (entry && entry->draft != DraftKind::None) {
    EAGLET_CHECK(!opts.draft_dir.empty(), "--spec-method {} needs --draft DIR", method_);
    served_ = ServedDraft::load(entry->draft, resolve_model_path(opts.draft_dir), target, eagle3_load_options(),
                                draft_quantize());
  }
  // A block draft's one forward proposes up to B - 1 tokens: auto keeps the whole block's chain
  // (or the depth cap given) and lets the cost model cut it.
  if (dflash() && policy_.adaptive) {
    policy_.whole_block = true;
    const int block = dflash()->config().block_size - 1;
    policy_.shape.depth = shape == "auto" ? block : std::min(policy_.shape.depth, block);
  }
  // Chain-only proposers (n-gram) and targets without tree attention (MiniMax MSA) draft chains.
  const bool trees = entry && entry->trees && target.supports_token_trees();
  if (!trees && !policy_.shape.is_chain()) {
    policy_.shape.topk = 1;
    policy_.shape.budget = policy_.shape.depth;
  }
}

Eagle3LoadOptions SpecSetup::eagle3_load_options() const {
  Eagle3LoadOptions lo;
  lo.numbering = opts_.aux_numbering == "output"  ? AuxNumbering::Output
                 : opts_.aux_numbering == "input" ? AuxNumbering::Input
                                                  : AuxNumbering::Auto;
  lo.semantics = parse_draft_semantics(opts_.draft_semantics);
  lo.allow_unused_tensors = opts_.allow_unused_draft_tensors;
  return lo;
}

kernels::QuantScheme SpecSetup::draft_quantize() const {
  return parse_quantize_option(opts_.draft_quantize, "--draft-quantize");
}

// A DFlash block sits in the draft cache while it is drafted, however little of it is verified.
int SpecSetup::max_step_tokens() const {
  if (!enabled()) return 1;
  const TreeShape& s = policy_.shape;
  const int step = 1 + std::max(s.budget, (s.depth - 1) * s.topk);
  // A DFlash tree's nodes go to the target only; the draft's cache holds the block.
  return dflash() ? std::max(1 + s.budget, dflash()->config().block_size) : step;
}

std::unique_ptr<Proposer> SpecSetup::new_proposer(int64_t draft_blocks, ThreadPool& pool) const {
  if (!enabled()) return nullptr;
  return find_entry(method_)->make(*this, draft_blocks, pool);
}

size_t SpecSetup::draft_block_bytes() const {
  return served_ ? served_->kv_block_bytes() : 0;
}

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
  const std::string stored =
      draft_quantize() == kernels::QuantScheme::None ? "" : fmt::format(", weights {}", opts_.draft_quantize);
  if (dflash())
    return fmt::format("DFlash draft {} (block {}, {}{})", opts_.draft_dir, dflash()->config().block_size, shape, stored);
  const Eagle3Draft* d = draft();
  if (!d) return fmt::format("{}, {}", method_, shape);
  return fmt::format("EAGLE-3 draft {} ({}, draft vocab {}, taps {},{},{}{})", opts_.draft_dir, shape,
                     d->config().draft_vocab, d->config().aux_layers[0], d->config().aux_layers[1],
                     d->config().aux_layers[2], stored);
}

}  // namespace eaglet
