#include "train/objective.h"

#include <fstream>

#include "core/error.h"
#include "core/splitmix.h"
#include "io/json_config.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "kernels/pack.h"
#include "train/draft_io.h"
#include "train/metrics.h"

namespace eaglet {

namespace {

// Held-out accuracy counts in the objectives' common form.
std::vector<double> with_acceptance(std::vector<double> counts, double accepted, double drafts) {
  counts.push_back(accepted);
  counts.push_back(drafts);
  return counts;
}

class Eagle3Objective final : public DraftObjective {
 public:
  // A loaded draft, trained on as it stands (its own lm_head and vocabulary map).
  Eagle3Objective(const TrainConfig& cfg, const Model& target, TrainableDraft d)
      : cfg_(cfg), target_(target), vmap_(std::move(d.vocab_map)), module_(d.module), d2t_index_(d.d2t_index),
        in_draft_(d.in_draft) {}
  Eagle3Objective(const TrainConfig& cfg, const Model& target, const DraftModuleOptions& mo, const VocabMapping& vmap)
      : cfg_(cfg), target_(target), vmap_(vmap), module_(mo) {
    const Eagle3Config& dc = mo.config;
    std::vector<int64_t> d2t_ids(size_t(dc.draft_vocab));
    for (int i = 0; i < dc.draft_vocab; ++i) d2t_ids[size_t(i)] = i + (vmap.d2t.empty() ? 0 : vmap.d2t[size_t(i)]);
    d2t_index_ = torch::tensor(d2t_ids, torch::kLong);
    in_draft_ = torch::tensor(std::vector<uint8_t>(vmap.t2d.begin(), vmap.t2d.end())).to(torch::kBool);
    torch::NoGradGuard ng;
    module_->embed.copy_(weight_tensor(target.embed_view()));
    if (cfg.lm_head != "train") module_->lm_head->weight.copy_(weight_tensor(target.lm_head()).index_select(0, d2t_index_));
    if (cfg.lm_head == "frozen-target") module_->lm_head->weight.set_requires_grad(false);
  }
  torch::nn::Module& module() override { return *module_; }
  int slots() const override { return cfg_.ttt_steps; }
  std::vector<double> denominators(const TttBatch& b) override { return ttt_valid_counts(b, cfg_.ttt_steps, in_draft_); }
  TttResult loss(const TttBatch& b, const std::vector<double>* denominators) override {
    return ttt_forward(module_, b, cfg_.ttt_steps, cfg_.step_weight, d2t_index_, in_draft_, denominators);
  }
  std::vector<double> eval_counts(ThreadPool& pool, const Model& target, const std::vector<HiddenSample>& samples,
                                  int batch_size) override {
    std::vector<double> counts;
    ttt_accuracy(module_, d2t_index_, in_draft_, pool, target, samples, cfg_.ttt_steps, batch_size, alignment(), &counts);
    return with_acceptance(std::move(counts), 0, 0);
  }
  double acceptance(const std::vector<double>& accuracy, double, double) const override {
    return simulated_acceptance(accuracy, 3);
  }
  std::string acceptance_label() const override { return "simulated acceptance length (k=3)"; }
  void write_export(const std::string& dir) override {
    DraftExport d = export_module(module_, target_.config(), vmap_);
    d.rope_source = cfg_.draft.rope_theta > 0 ? "model.draft.rope_theta" : "target";
    d.loss_mask_alignment = cfg_.loss_mask;
    write_draft_export(dir, d, cfg_.key_style);
  }

 private:
  LossMaskAlignment alignment() const { return loss_mask_alignment(cfg_); }
  const TrainConfig& cfg_;
  const Model& target_;
  VocabMapping vmap_;
  DraftModule module_;
  torch::Tensor d2t_index_, in_draft_;
};

// SpecForge's suggested decay for its block sizes (7 at 16, 5 at 10, 4 at 8).
double default_gamma(int block_size) { return block_size >= 16 ? 7.0 : block_size >= 10 ? 5.0 : 4.0; }

// Blocks per evaluation forward: bounds the activations of a long held-out sample.
constexpr int kEvalAnchorsPerForward = 64;

// The target's embedding and lm_head, which a DFlash draft reads and never trains.
void use_target_tensors(DFlashModule& m, const Model& target) {
  m->embed = weight_tensor(target.embed_view());
  m->lm_head = weight_tensor(target.lm_head());
}

class DFlashObjective final : public DraftObjective {
 public:
  DFlashObjective(const TrainConfig& cfg, const Model& target, const DFlashModuleOptions& mo)
      : DFlashObjective(cfg, target, DFlashModule(mo)) {}
  // `m` with its weights (the target's embedding and lm_head set).
  DFlashObjective(const TrainConfig& cfg, const Model& target, DFlashModule m)
      : cfg_(cfg), target_(target), module_(std::move(m)),
        gamma_(cfg.loss_decay_gamma > 0 ? cfg.loss_decay_gamma : default_gamma(module_->opts.config.block_size)) {
    use_target_tensors(module_, target);
  }
  torch::nn::Module& module() override { return *module_; }
  int slots() const override { return module_->opts.config.block_size - 1; }
  void prepare(const TttBatch& b, int64_t first_sample) override {
    std::vector<uint64_t> seeds;
    for (int64_t i = 0; i < b.ids.size(0); ++i) {
      uint64_t state = cfg_.seed * 0x100000001b3ull + uint64_t(first_sample + i);
      seeds.push_back(splitmix64(state));
    }
    anchors_ = draw_anchors(b, cfg_.num_anchors, &seeds);
  }
  std::vector<double> denominators(const TttBatch& b) override {
    return {dflash_denominator(b, anchors_, module_->opts.config.block_size, gamma_)};
  }
  TttResult loss(const TttBatch& b, const std::vector<double>* denominators) override {
    return dflash_forward(module_, b, anchors_, gamma_, denominators ? &(*denominators)[0] : nullptr);
  }
  std::vector<double> eval_counts(ThreadPool& pool, const Model& target, const std::vector<HiddenSample>& samples,
                                  int) override;
  double acceptance(const std::vector<double>&, double accepted, double drafts) const override {
    return drafts > 0 ? accepted / drafts : 0;
  }
  std::string acceptance_label() const override {
    return fmt::format("acceptance length (greedy, block {})", module_->opts.config.block_size);
  }
  void write_export(const std::string& dir) override;

 private:
  const TrainConfig& cfg_;
  const Model& target_;
  DFlashModule module_;
  double gamma_;
  Anchors anchors_;
};

// Every eligible anchor of every held-out sample, a sample at a time.
std::vector<double> DFlashObjective::eval_counts(ThreadPool& pool, const Model& target,
                                                 const std::vector<HiddenSample>& samples, int) {
  const int S = slots();
  std::vector<double> counts(size_t(2 * S), 0);
  double accepted = 0, drafts = 0;
  torch::NoGradGuard ng;
  const bool was_training = module_->is_training();
  module_->eval();
  for (const HiddenSample& s : samples) {
    const TttBatch b = make_batch(pool, target, std::vector<const HiddenSample*>{&s}, LossMaskAlignment::TorchSpec);
    const Anchors all = draw_anchors(b, 0, nullptr);
    for (int64_t a0 = 0; a0 < all.pos.size(1); a0 += kEvalAnchorsPerForward) {
      const int64_t n = std::min<int64_t>(kEvalAnchorsPerForward, all.pos.size(1) - a0);
      const TttResult r = dflash_forward(module_, b, {all.pos.narrow(1, a0, n), all.real.narrow(1, a0, n)}, gamma_);
      for (int k = 0; k < S; ++k) {
        counts[size_t(k)] += r.step_correct[size_t(k)];
        counts[size_t(S + k)] += r.step_valid[size_t(k)];
      }
      accepted += r.accepted;
      drafts += r.drafts;
    }
  }
  if (was_training) module_->train();
  return with_acceptance(std::move(counts), accepted, drafts);
}

// z-lab's layout: config.json (dflash_config_json) and the parameters under their own names; the
// embedding and lm_head are the target's and are not written.
void DFlashObjective::write_export(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const DFlashModuleOptions& o = module_->opts;
  const ModelConfig& tc = target_.config();
  nlohmann::json cfg = dflash_config_json(o.config, o.rope, tc.max_position, tc.num_layers, tc.vocab);
  cfg["torch_dtype"] = "float32";
  cfg["eaglet_training"] = {{"loss_decay_gamma", gamma_}, {"num_anchors", cfg_.num_anchors}};
  std::ofstream(dir + "/config.json") << cfg.dump(2) << "\n";
  std::vector<TensorToWrite> ts;
  for (const auto& p : module_->named_parameters()) {
    auto c = p.value().detach().to(torch::kFloat32).contiguous();
    ts.push_back({p.key(), DType::F32, c.sizes().vec(),
                  std::string(reinterpret_cast<const char*>(c.data_ptr<float>()), size_t(c.numel()) * 4)});
  }
  write_safetensors(dir + "/model.safetensors", ts, {{"format", "pt"}});
}

}  // namespace

LossMaskAlignment loss_mask_alignment(const TrainConfig& c) {
  return c.loss_mask == "next-token" ? LossMaskAlignment::NextToken : LossMaskAlignment::TorchSpec;
}

std::unique_ptr<DraftObjective> make_eagle3_objective(const TrainConfig& cfg, const Model& target,
                                                      const DraftModuleOptions& mo, const VocabMapping& vmap) {
  return std::make_unique<Eagle3Objective>(cfg, target, mo, vmap);
}

std::unique_ptr<DraftObjective> make_dflash_objective(const TrainConfig& cfg, const Model& target,
                                                      const DFlashModuleOptions& mo) {
  return std::make_unique<DFlashObjective>(cfg, target, mo);
}

std::unique_ptr<DraftObjective> load_objective(const TrainConfig& cfg, const std::string& dir, const Model& target) {
  const auto top = nlohmann::json::parse(read_text_file(dir + "/config.json"), nullptr, false);
  const bool dflash = top.is_object() && top.value("architectures", nlohmann::json::array()) ==
                                             nlohmann::json::array({"DFlashDraftModel"});
  if (dflash) return std::make_unique<DFlashObjective>(cfg, target, load_dflash_module(dir, target));
  return std::make_unique<Eagle3Objective>(cfg, target, load_trainable_draft(dir, target));
}

DFlashModuleOptions dflash_module_options(const TrainConfig& c, const ModelConfig& t) {
  const DraftShape& d = c.draft;
  nlohmann::json j = {{"architectures", {"DFlashDraftModel"}},
                      {"hidden_size", d.hidden ? d.hidden : t.hidden},
                      {"intermediate_size", d.intermediate ? d.intermediate : t.intermediate},
                      {"num_attention_heads", d.num_heads ? d.num_heads : t.num_heads},
                      {"num_key_value_heads", d.num_kv_heads ? d.num_kv_heads : t.num_kv_heads},
                      {"head_dim", d.head_dim ? d.head_dim : t.head_dim},
                      {"num_hidden_layers", d.num_layers},
                      {"num_target_layers", t.num_layers},
                      {"rms_norm_eps", t.rms_eps},
                      {"rope_theta", d.rope_theta > 0 ? d.rope_theta : t.rope_theta},
                      {"block_size", d.block_size}};
  if (!t.rope_scaling_config.is_null()) j["rope_scaling"] = t.rope_scaling_config;
  j["dflash_config"] = {{"mask_token_id", d.mask_token_id >= 0 ? d.mask_token_id : 0}};
  if (!d.target_layer_ids.empty()) j["dflash_config"]["target_layer_ids"] = d.target_layer_ids;
  // Sliding-window and causal layers: a published config's keys as they stand (the parser below
  // resolves them in vLLM's order, as it does for drafts it loads), then the recipe's own.
  if (c.draft.dflash() && !c.draft_config.empty()) {
    const auto src = nlohmann::json::parse(read_text_file(c.draft_config), nullptr, false);
    for (const char* k : {"layer_types", "sliding_window", "is_causal"})
      if (src.is_object() && src.contains(k)) j[k] = src[k];
    const nlohmann::json& dc = src.is_object() && src.contains("dflash_config") ? src["dflash_config"] : nlohmann::json();
    for (const char* k : {"use_swa", "swa_window_size", "causal"})
      if (dc.is_object() && dc.contains(k)) j["dflash_config"][k] = dc[k];
  }
  if (!d.layer_types.empty()) j["layer_types"] = d.layer_types;
  if (d.sliding_window > 0) {
    j["sliding_window"] = d.sliding_window;
    j["dflash_config"].erase("swa_window_size");  // (which the parser would read first)
  }
  if (d.causal != "auto") j["is_causal"] = d.causal == "true";
  // The parser that loads published drafts checks the recipe too (layer ids, sizes, the block).
  const JsonConfig cfg(j, "config: model.draft (dflash)");
  DFlashModuleOptions o{parse_dflash_config(cfg, t.num_layers, t.hidden), {}};
  EAGLET_CHECK(o.config.mask_token_id < t.vocab, "config: model.draft.mask_token_id {} is outside the target's "
               "vocabulary of {}", o.config.mask_token_id, t.vocab);
  o.rope = Rope::from_config(cfg, o.config.head_dim);
  return o;
}

DFlashModule load_dflash_module(const std::string& dir, const Model& target) {
  const JsonConfig top = JsonConfig::load(dir + "/config.json");
  const DFlashConfig c = parse_dflash_config(top, target.config().num_layers, target.config().hidden);
  DFlashModule m(DFlashModuleOptions{c, Rope::from_config(top, c.head_dim)});
  const Checkpoint ck = Checkpoint::open_dir(dir);
  torch::NoGradGuard ng;
  for (auto& p : m->named_parameters()) {
    const TensorInfo& t = ck.get(p.key(), p.value().sizes().vec());
    std::vector<float> f(size_t(t.numel()));
    kernels::to_f32(t.dtype, t.data, f.data(), t.numel());
    p.value().copy_(torch::from_blob(f.data(), t.shape, torch::kFloat32));
  }
  use_target_tensors(m, target);
  return m;
}

}  // namespace eaglet
