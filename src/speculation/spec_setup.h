// What `--draft`, `--spec-method`, `-k`, `--draft-shape` and `--aux-numbering` resolve to, shared
// by generate, bench, demo and serve: the loaded draft (if any), the proposer registry, and the
// draft policy (fixed shape, or auto with the measured cost model).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "speculation/draft_policy.h"
#include "speculation/proposer.h"
#include "speculation/served_draft.h"

namespace eaglet {

struct SpecOptions {
  std::string draft_dir;
  std::string method;               // registry name; "" = eagle3 with a draft, else none
  int num_speculative_tokens = -1;  // k of a chain; -1 = not given (auto); 0 disables speculation
  std::string draft_shape;          // auto | chain | topk=..,depth=..,budget=..; "" = chain with -k, else auto
  std::string aux_numbering = "auto";  // "auto" (as vLLM / SGLang decide) | "input" (vLLM) | "output" (SGLang/SpecForge/TorchSpec)
  int ngram_max = 3, ngram_min = 1;
  std::string cost_model_cache;     // "" = default file, "off" = measure every time
  // llama-server's --draft-min: a step whose draft (after the policy's trim) has fewer tokens is
  // not verified with one (plain decoding that step). 0 = any draft is used.
  int draft_min = 0;
  std::string draft_semantics = "auto";  // what norm_output means: auto = vllm | specforge-legacy
  bool allow_unused_draft_tensors = false;  // load a draft whose checkpoint has tensors its flavour does not read
  std::string draft_quantize = "none";     // the draft's matrices on load: none | q8_0 | q4_0 | q4_k
  // Structured output: the draft proposes only tokens the request's grammar allows (EAGLE-3, DFlash;
  // verification masks the target either way, so the output is the same).
  bool constrain_draft = true;
};

// vLLM's `--speculative-config` JSON onto `o`: `method` (eagle3 | ngram), `model` (the draft),
// `num_speculative_tokens`, `prompt_lookup_max` / `prompt_lookup_min`,
// `draft_tensor_parallel_size` (1 on CPU), `quantization` (the draft quantised on load, as
// --draft-quantize), and eaglet's `draft_shape` / `aux_numbering` / `draft_semantics`. Bad
// JSON, unknown keys, wrong types and methods eaglet does not run are errors naming the key (and
// `option`, the command-line option the JSON came from).
void apply_speculative_config(SpecOptions& o, const std::string& json, const std::string& option = "--speculative-config");

class SpecSetup;
// Builds a proposer for one engine: `draft_blocks` KV blocks of draft state, forwards on `pool`.
using ProposerFactory =
    std::function<std::unique_ptr<Proposer>(const SpecSetup&, int64_t draft_blocks, ThreadPool& pool)>;

class SpecSetup {
 public:
  // Adds a proposer to the registry under `name` (--spec-method NAME). `draft`: the --draft model
  // it reads; `trees`: it drafts token trees (else tree shapes fall back to chains).
  static void register_proposer(const std::string& name, DraftKind draft, bool trees, ProposerFactory make);

  SpecSetup(const SpecOptions& opts, const Model& target);
  bool enabled() const { return method_ != "none" && !policy_.shape.empty(); }
  const std::string& method() const { return method_; }
  const SpecOptions& options() const { return opts_; }
  const Eagle3Draft* draft() const { return served_ ? served_->eagle3() : nullptr; }
  const DFlashDraft* dflash() const { return served_ ? served_->dflash() : nullptr; }
  // The --draft model (null for the n-gram proposer or without speculation).
  const std::shared_ptr<const ServedDraft>& served_draft() const { return served_; }
  // How EAGLE-3 drafts load (--aux-numbering, --draft-semantics): later versions of the draft too.
  Eagle3LoadOptions eagle3_load_options() const;
  // --draft-quantize: how every version of the draft is stored once loaded.
  kernels::QuantScheme draft_quantize() const;
  const DraftPolicyConfig& policy_config() const { return policy_; }
  // Chain length of a fixed chain, else the deepest tree the policy may draft.
  int k() const { return policy_.shape.depth; }
  // Most tokens one step adds to a sequence's target or draft KV cache beyond its length.
  int max_step_tokens() const;

  // A proposer for up to `draft_blocks` KV blocks of draft state (all sequences together) that
  // runs its forwards on `pool`.
  std::unique_ptr<Proposer> new_proposer(int64_t draft_blocks, ThreadPool& pool) const;
  // Draft KV bytes per block (0 without a draft model).
  size_t draft_block_bytes() const;
  // The policy for one engine on `pool`; auto measures (or loads) the target's cost model once per
  // thread count. `scored`: the proposer's trees carry draft probabilities.
  std::unique_ptr<DraftPolicy> new_policy(ThreadPool& pool, Model& target, bool scored) const;
  std::string describe() const;
  static std::vector<std::string> methods();
  // Uses `cost` instead of measuring the target (tests, and tools that measured already).
  void set_cost_model(std::shared_ptr<const CostModel> cost) { cost_ = std::move(cost); }

 private:
  std::string method_;
  SpecOptions opts_;
  DraftPolicyConfig policy_;
  std::shared_ptr<const ServedDraft> served_;
  std::shared_ptr<const CostModel> cost_;  // set_cost_model: every engine uses it
  // Measured per thread count (a benchmark sweeps them; the costs differ).
  mutable std::map<int, std::shared_ptr<const CostModel>> measured_;
};

}  // namespace eaglet
