#include "train/trainer.h"

#include <spdlog/spdlog.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/bad_records.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "io/json_config.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "models/eagle3_schema.h"
#include "models/rope.h"
#include "train/chat_data.h"
#include "train/dataset.h"
#include "train/draft_export.h"
#include "train/draft_io.h"
#include "train/distributed.h"
#include "train/draft_module.h"
#include "train/metrics.h"
#include "train/objective.h"
#include "train/progress.h"
#include "train/regen.h"
#include "train/vocab_mapping.h"

namespace eaglet {

namespace fs = std::filesystem;

namespace {
using clock_type = std::chrono::steady_clock;

std::vector<int> default_aux_layers(int L) { return {2, L / 2, L - 3}; }

// The draft's settings from the training config, defaulting to the target's shape; `aux`: the
// taps, in eaglet's numbering.
DraftModuleOptions module_options(const TrainConfig& c, const ModelConfig& t, std::vector<int> aux) {
  Eagle3Config o;
  o.hidden = c.draft.hidden ? c.draft.hidden : t.hidden;
  o.target_hidden = t.hidden;
  o.intermediate = c.draft.intermediate ? c.draft.intermediate : t.intermediate;
  o.num_heads = c.draft.num_heads ? c.draft.num_heads : t.num_heads;
  o.num_kv_heads = c.draft.num_kv_heads ? c.draft.num_kv_heads : t.num_kv_heads;
  o.head_dim = c.draft.head_dim ? c.draft.head_dim : t.head_dim;
  o.vocab = t.vocab;
  o.draft_vocab = c.draft.draft_vocab ? c.draft.draft_vocab : t.vocab;
  o.rms_eps = t.rms_eps;
  o.aux_layers = std::move(aux);
  o.key_prefix = eagle3::kMidlayer;
  o.fc_norm = c.draft.fc_norm || c.draft.eagle31();
  o.norm_output = c.draft.norm_output || c.draft.eagle31();
  EAGLET_CHECK(o.hidden == t.hidden, "config: model.draft.hidden_size {} must equal the target's hidden size {} (the "
               "draft shares the target's embedding)", o.hidden, t.hidden);
  EAGLET_CHECK(o.num_heads % o.num_kv_heads == 0, "config: draft heads must be a multiple of kv heads");
  // RoPE at the draft's theta with the target's scaling, computed as inference will from the export.
  nlohmann::json rope = {{"rope_theta", c.draft.rope_theta > 0 ? c.draft.rope_theta : t.rope_theta}};
  if (!t.rope_scaling_config.is_null()) rope["rope_scaling"] = t.rope_scaling_config;
  return {o, Rope::from_config(JsonConfig(rope, "the draft's rope settings"), o.head_dim)};
}

double lr_at(const TrainConfig& c, int64_t step) {
  const int64_t warm = std::max<int64_t>(1, int64_t(c.warmup_ratio * c.steps));
  if (step < warm) return c.lr * double(step + 1) / double(warm);
  const double p = double(step - warm) / double(std::max<int64_t>(1, c.steps - warm));
  return c.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, p)));
}

// Everything one rank holds. With several ranks (torchrun's environment, or `--nproc-per-node`)
// every rank keeps the whole draft and its gradients; with ZeRO-1 only the optimiser state of the
// parameters it owns (`owner`).
struct Run {
  const TrainConfig& cfg;
  ModelBundle bundle;
  std::vector<TrainSample> train{}, eval{};
  std::vector<int> aux{};  // the taps the draft reads (eaglet numbering)
  VocabMapping vmap{};
  std::unique_ptr<DraftObjective> draft{};
  std::vector<torch::Tensor> params{};  // trainable, in module order
  std::vector<int> owner{};           // rank keeping each parameter's optimiser state (ZeRO-1), else 0
  bool sharded = false;               // ZeRO-1 over several ranks; else every rank steps everything
  std::unique_ptr<torch::optim::AdamW> optim{};  // over the parameters this rank owns (may be none)
  int64_t step = 0;
  ThreadPool* train_pool = nullptr;  // the training thread's kernels (target logits)
  std::unique_ptr<ProcessGroup> pg{};  // null with one rank
  int rank = 0, world = 1;
  int64_t batch = 0;  // global samples per step
  bool main() const { return rank == 0; }
  bool owns(size_t i) const { return !sharded || owner[i] == rank; }
};

std::string state_key(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

// The optimiser state of parameter i as [exp_avg, exp_avg_sq, step], gathered from its owner to
// every rank (checkpoints are written once, by rank 0, in a form any world size can load).
std::vector<torch::Tensor> gather_adam_state(Run& r, size_t i) {
  const torch::Tensor& p = r.params[i];
  std::vector<torch::Tensor> st{torch::zeros_like(p), torch::zeros_like(p), torch::zeros({1}, torch::kFloat64)};
  if (r.owns(i) && r.optim) {
    auto it = r.optim->state().find(state_key(p));
    if (it != r.optim->state().end()) {
      auto& a = static_cast<torch::optim::AdamWParamState&>(*it->second);
      st[0].copy_(a.exp_avg());
      st[1].copy_(a.exp_avg_sq());
      st[2].fill_(double(a.step()));
    }
  }
  if (r.pg && r.owner[i] != 0)
    for (auto& t : st) r.pg->broadcast(t, r.owner[i]);
  return st;
}

void save_checkpoint(Run& r) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> adam;  // 3 per parameter, in r.params order
  for (size_t i = 0; i < r.params.size(); ++i)
    for (auto& t : gather_adam_state(r, i)) adam.push_back(t);
  if (!r.main()) return;
  const std::string dir = r.cfg.checkpoint_dir(), tmp = dir + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  {
    torch::serialize::OutputArchive archive;
    r.draft->module().save(archive);
    archive.save_to(tmp + "/model.pt");
  }
  torch::save(adam, tmp + "/adam_state.pt");
  auto gen = at::detail::getDefaultCPUGenerator();
  std::vector<torch::Tensor> rng;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng.push_back(gen.get_state());
  }
  torch::save(rng, tmp + "/rng.pt");
  nlohmann::json state = {{"step", r.step}, {"samples_consumed", r.step * r.batch}, {"d2t", r.vmap.d2t},
                          {"aux_layers", r.aux}, {"world_size", r.world}, {"config", r.cfg.to_yaml()}};
  std::ofstream(tmp + "/state.json") << state.dump(1);
  // Swap in atomically: a kill at any moment leaves one complete checkpoint.
  fs::remove_all(dir + ".old");
  if (fs::exists(dir)) fs::rename(dir, dir + ".old");
  fs::rename(tmp, dir);
  fs::remove_all(dir + ".old");
}

bool load_checkpoint(Run& r) {
  std::string dir = r.cfg.checkpoint_dir();
  if (!fs::exists(dir + "/state.json") && fs::exists(dir + ".old/state.json")) dir += ".old";
  if (!fs::exists(dir + "/state.json")) return false;
  auto state = nlohmann::json::parse(read_text_file(dir + "/state.json"));
  EAGLET_CHECK(state.at("aux_layers").get<std::vector<int>>() == r.aux,
               "{}: checkpoint was trained on other aux layers; use a new output_dir", dir);
  EAGLET_CHECK(state.at("d2t").get<std::vector<int64_t>>() == r.vmap.d2t,
               "{}: checkpoint has another draft vocabulary; use a new output_dir", dir);
  {
    torch::serialize::InputArchive archive;
    archive.load_from(dir + "/model.pt");
    r.draft->module().load(archive);
  }
  if (fs::exists(dir + "/adam_state.pt")) {
    std::vector<torch::Tensor> adam;
    torch::load(adam, dir + "/adam_state.pt");
    EAGLET_CHECK(adam.size() == 3 * r.params.size(), "{}/adam_state.pt: {} tensors for {} parameters", dir, adam.size(),
                 r.params.size());
    for (size_t i = 0; i < r.params.size(); ++i) {
      if (!r.owns(i) || !r.optim) continue;
      auto st = std::make_unique<torch::optim::AdamWParamState>();
      st->step(int64_t(adam[3 * i + 2].item<double>()));
      if (st->step() == 0) continue;  // never stepped: AdamW creates its state on the first step
      st->exp_avg(adam[3 * i].clone());
      st->exp_avg_sq(adam[3 * i + 1].clone());
      r.optim->state()[state_key(r.params[i])] = std::move(st);
    }
  } else {
    // Checkpoints before data parallelism kept the whole optimiser in one archive.
    EAGLET_CHECK(r.world == 1, "{}: this checkpoint's optimizer.pt resumes on one rank only", dir);
    torch::load(*r.optim, dir + "/optimizer.pt");
  }
  std::vector<torch::Tensor> rng;
  torch::load(rng, dir + "/rng.pt");
  auto gen = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng[0]);
  }
  r.step = state.at("step").get<int64_t>();
  const int saved_world = state.value("world_size", 1);
  if (r.main())
    spdlog::info("resumed from {} at step {}{}", dir, r.step,
                 saved_world != r.world ? fmt::format(" (saved by {} ranks, now {})", saved_world, r.world) : "");
  return true;
}

// Sums `v` over the ranks (identity with one).
void sum_over_ranks(Run& r, std::vector<double>& v) {
  if (!r.pg || v.empty()) return;
  auto t = torch::tensor(v, torch::kFloat64);
  r.pg->all_reduce_sum(t);
  for (size_t i = 0; i < v.size(); ++i) v[i] = t[int64_t(i)].item<double>();
}

// `x` of every rank, indexed by rank (just {x} with one).
std::vector<double> per_rank_values(Run& r, double x) {
  std::vector<double> v(size_t(r.world), 0);
  v[size_t(r.rank)] = x;
  sum_over_ranks(r, v);
  return v;
}

struct Eval {
  std::vector<double> accuracy;  // per TTT step or block slot
  double acceptance = 0;
};

// Per-slot accuracy and the acceptance length from counts [correct..., scored..., accepted, drafts]
// summed over the ranks.
Eval from_counts(const Run& r, const std::vector<double>& counts) {
  const size_t S = size_t(r.draft->slots());
  Eval e;
  for (size_t i = 0; i < S; ++i) e.accuracy.push_back(counts[S + i] > 0 ? counts[i] / counts[S + i] : 0);
  e.acceptance = r.draft->acceptance(e.accuracy, counts[2 * S], counts[2 * S + 1]);
  return e;
}

// Accuracy on the held-out samples; each rank scores its share (`eval` holds it).
Eval evaluate(Run& r, const std::vector<HiddenSample>& eval) {
  std::vector<double> counts = r.draft->eval_counts(*r.train_pool, *r.bundle.model, eval, r.cfg.batch_size);
  sum_over_ranks(r, counts);
  return from_counts(r, counts);
}

std::string fmt_acc(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.3f}", s.empty() ? "" : " ", x);
  return s;
}

// Samples of a data file as training samples (regenerated JSONL, chat data, or plain texts).
std::vector<TrainSample> load_samples(const TrainConfig& cfg, const std::string& path, ModelBundle& b, int limit,
                                      BadRecords* bad) {
  if (is_regenerated_file(path)) {
    auto out = load_regenerated(path, cfg.max_length, b.model->config().vocab, bad);
    if (limit > 0 && int(out.size()) > limit) out.resize(size_t(limit));
    return out;
  }
  if (is_chat_file(path)) {
    const auto tmpl = chat_template_for(path, cfg.chat_template, b.tokenizer);
    std::vector<TrainSample> out;
    for (auto& c : load_conversations(path, limit, bad)) out.push_back(render_conversation(c, *tmpl, b.tokenizer, cfg.max_length));
    return out;
  }
  return tokenize_texts(load_texts(path, limit, bad), b.tokenizer, cfg.max_length);
}

// Bytes of parameters, gradients and AdamW state (2 moments) this rank holds.
nlohmann::json memory_report(const Run& r) {
  int64_t all = 0, owned = 0;
  for (size_t i = 0; i < r.params.size(); ++i) {
    all += r.params[i].numel();
    if (r.owns(i)) owned += r.params[i].numel();
  }
  const double MB = 1024.0 * 1024.0;
  return {{"kind", "memory"}, {"rank", r.rank}, {"world_size", r.world}, {"zero_stage", r.cfg.zero_stage},
          {"params_mb", all * 4 / MB}, {"grads_mb", all * 4 / MB}, {"optimizer_state_mb", owned * 8 / MB},
          {"optimizer_state_mb_replicated", all * 8 / MB}};
}

double peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// Copies every parameter from the rank that owns it (after the owners' optimiser steps), one
// broadcast per owning rank.
void share_parameters(Run& r) {
  torch::NoGradGuard ng;
  for (int src = 0; src < r.world; ++src) {
    std::vector<torch::Tensor> mine;
    for (size_t i = 0; i < r.params.size(); ++i)
      if (r.owner[i] == src) mine.push_back(r.params[i]);
    if (mine.empty()) continue;
    std::vector<torch::Tensor> flat_parts;
    for (auto& p : mine) flat_parts.push_back(p.detach().reshape({-1}));
    auto flat = torch::cat(flat_parts);
    r.pg->broadcast(flat, src);
    int64_t off = 0;
    for (auto& p : mine) {
      p.detach().copy_(flat.narrow(0, off, p.numel()).view(p.sizes()));
      off += p.numel();
    }
  }
}
}  // namespace

namespace {
// The process group (several ranks), who narrates, and the batch split: `per_rank` samples per
// rank per step, `r.batch` in all.
int64_t join_ranks(Run& r, const DistEnv& env) {
  const TrainConfig& cfg = r.cfg;
  r.rank = env.rank;
  r.world = env.world;
  if (r.world > 1) r.pg = std::make_unique<ProcessGroup>(env, std::chrono::seconds(cfg.dist_timeout_s));
  if (r.world > 1) spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}] [%l] %v", r.rank));
  if (!r.main()) spdlog::set_level(spdlog::level::warn);  // one rank narrates
  EAGLET_CHECK(cfg.micro_batch_size > 0 || cfg.batch_size % r.world == 0,
               "config: training.batch_size {} is not a multiple of the {} ranks (or set training.micro_batch_size)",
               cfg.batch_size, r.world);
  const int64_t per_rank = cfg.micro_batch_size > 0 ? cfg.micro_batch_size : cfg.batch_size / r.world;
  r.batch = per_rank * r.world;
  if (r.main()) {
    fs::create_directories(cfg.output_dir);
    std::ofstream(cfg.output_dir + "/config.yaml") << cfg.to_yaml();
  }
  return per_rank;
}

// Data file f's samples: regenerated with the target (rank 0; the others read its output), or
// taken as it is (already regenerated, or regen off), at most `limit` (0: all).
std::vector<TrainSample> load_file(Run& r, ThreadPool& inference_pool, const std::vector<std::string>& files, size_t f,
                                   int limit, BadRecords* bad) {
  const TrainConfig& cfg = r.cfg;
  const bool regenerated = is_regenerated_file(files[f]);
  if (cfg.regen && regenerated) spdlog::info("{}: already regenerated (input_ids); trained on as is", files[f]);
  if (!cfg.regen || regenerated) return load_samples(cfg, files[f], r.bundle, limit, bad);
  const std::string out = cfg.regen_path(f, files.size());
  if (r.main()) {
    RegenOptions ro{files[f], out, limit, cfg.regen_temperature, cfg.regen_max_new_tokens, cfg.regen_prefix_tokens,
                    cfg.regen_batch, cfg.regen_samples_per_prompt, cfg.seed, bad, cfg.chat_template};
    regenerate(inference_pool, *r.bundle.model, r.bundle.tokenizer, r.bundle.eos_ids, ro);
    if (r.pg) r.pg->publish(fmt::format("regen-done-{}", f));
  } else {
    r.pg->wait_for(fmt::format("regen-done-{}", f), std::chrono::hours(48));
  }
  return load_regenerated(out, cfg.max_length, r.bundle.model->config().vocab, bad);
}

// The training and held-out splits (data.eval_path, else the last eval_samples); malformed
// records are skipped and counted. Returns the steps num_epochs asks for (0: training.steps).
int load_data(Run& r, ThreadPool& inference_pool) {
  const TrainConfig& cfg = r.cfg;
  BadRecords bad(cfg.max_bad_records);
  std::vector<TrainSample> all;
  EAGLET_CHECK(!cfg.data_path.empty(), "config: data.path is required");
  const auto files = expand_data_paths(cfg.data_path);
  for (size_t f = 0; f < files.size(); ++f) {
    const int limit = cfg.num_samples > 0 ? cfg.num_samples - int(all.size()) : 0;
    if (cfg.num_samples > 0 && limit <= 0) break;
    for (auto& x : load_file(r, inference_pool, files, f, limit, &bad)) all.push_back(std::move(x));
  }
  if (!cfg.eval_path.empty()) {
    for (const auto& path : expand_data_paths(cfg.eval_path))
      for (auto& x : load_samples(cfg, path, r.bundle, cfg.eval_samples, &bad)) r.eval.push_back(std::move(x));
    r.train = std::move(all);
    EAGLET_CHECK(!r.train.empty() && !r.eval.empty(), "config: data.path {} / data.eval_path {}: no samples",
                 cfg.data_path, cfg.eval_path);
  } else {
    EAGLET_CHECK(int(all.size()) > cfg.eval_samples, "{}: {} samples leave none for training after {} held out",
                 cfg.data_path, all.size(), cfg.eval_samples);
    r.eval.assign(all.end() - cfg.eval_samples, all.end());
    r.train.assign(all.begin(), all.end() - cfg.eval_samples);
  }
  if (bad.count() > 0)
    spdlog::warn("skipped {} malformed record(s); the first: {}", bad.count(), fmt::join(bad.first(), " | "));
  if (cfg.num_epochs <= 0) return 0;
  const int steps = int(std::ceil(cfg.num_epochs * double(r.train.size()) / double(r.batch)));
  spdlog::info("{} epoch(s) of {} samples: {} steps", cfg.num_epochs, r.train.size(), steps);
  return steps;
}

// The optimiser over the parameters this rank owns (ZeRO-1 shards them over the ranks), resumed
// from the checkpoint, with every rank on rank 0's parameters.
void build_optimizer(Run& r) {
  r.sharded = r.world > 1 && r.cfg.zero_stage == 1;
  r.owner = r.sharded ? zero1_owners(r.params, r.world) : std::vector<int>(r.params.size(), 0);
  std::vector<torch::Tensor> owned;
  for (size_t i = 0; i < r.params.size(); ++i)
    if (r.owns(i)) owned.push_back(r.params[i]);
  if (!owned.empty())
    r.optim = std::make_unique<torch::optim::AdamW>(
        owned, torch::optim::AdamWOptions(r.cfg.lr).betas({0.9, 0.95}).weight_decay(0.0));
  load_checkpoint(r);
  // Every rank starts from rank 0's parameters (the same seed gives the same ones; this makes it
  // so whatever the platform's RNG).
  if (r.pg)
    for (auto& p : r.params) {
      auto d = p.detach();
      r.pg->broadcast(d, 0);
    }
}

// The id of the token DFlash blocks are filled with: the recipe's, else the target tokenizer's
// mask token, else its unk.
int mask_token(const TrainConfig& cfg, const Tokenizer& tok) {
  if (cfg.draft.mask_token_id >= 0) return cfg.draft.mask_token_id;
  for (const char* name : {"<|MASK|>", "<mask>", "<|mask|>", "[MASK]", "<unk>"})
    if (const int id = tok.token_id(name); id >= 0) return id;
  fail("config: model.draft.mask_token_id is not set and the target's tokenizer has no mask or unk token");
}

// The draft's taps and objective: EAGLE-3's three aux layers and vocabulary map, or DFlash's
// target layers.
void build_objective(Run& r) {
  const TrainConfig& cfg = r.cfg;
  const Model& target = *r.bundle.model;
  const auto& tc = target.config();
  if (cfg.draft.dflash()) {
    TrainConfig with_mask = cfg;
    with_mask.draft.mask_token_id = mask_token(cfg, r.bundle.tokenizer);
    const DFlashModuleOptions mo = dflash_module_options(with_mask, tc);
    r.aux = mo.config.taps;
    spdlog::info("DFlash draft: {} layer(s), block {}, mask token {}, target layers {} (taps {})", mo.config.num_layers,
                 mo.config.block_size, mo.config.mask_token_id, fmt::join(mo.config.target_layer_ids, ","),
                 fmt::join(r.aux, ","));
    torch::manual_seed(int64_t(cfg.seed));
    r.draft = make_dflash_objective(cfg, target, mo);
    return;
  }
  r.aux = cfg.aux_layers.empty() ? default_aux_layers(tc.num_layers) : cfg.aux_layers;
  std::sort(r.aux.begin(), r.aux.end());
  for (int a : r.aux) EAGLET_CHECK(a >= 0 && a <= tc.num_layers, "config: aux layer {} outside [0, {}]", a, tc.num_layers);
  EAGLET_CHECK(r.aux.size() == 3, "config: model.aux_layers needs 3 ids");
  spdlog::info("aux layers (residual stream entering layer): {}, {}, {}", r.aux[0], r.aux[1], r.aux[2]);
  const DraftModuleOptions mo = module_options(cfg, tc, r.aux);
  const Eagle3Config& dc = mo.config;
  if (dc.draft_vocab < dc.vocab) r.vmap = build_vocab_mapping(r.train, dc.vocab, dc.draft_vocab);
  else r.vmap.t2d.assign(size_t(dc.vocab), 1);
  torch::manual_seed(int64_t(cfg.seed));
  r.draft = make_eagle3_objective(cfg, target, mo, r.vmap);
}

// The draft (embedding and head from the target) and its optimiser.
void build_draft(Run& r) {
  build_objective(r);
  for (auto& p : r.draft->module().parameters())
    if (p.requires_grad()) r.params.push_back(p);
  build_optimizer(r);
}

void report_memory(Run& r, MetricsLog& metrics, int64_t per_rank) {
  nlohmann::json mem = memory_report(r);
  if (r.world > 1) mem["optimizer_state_mb_per_rank"] = per_rank_values(r, mem["optimizer_state_mb"].get<double>());
  mem["step"] = r.step;
  metrics.write(mem);
  spdlog::info("{} rank(s), {} samples per step ({} per rank); per rank: params {:.1f} MB, grads {:.1f} MB, AdamW "
               "state {:.1f} MB ({})", r.world, r.batch, per_rank, mem["params_mb"].get<double>(),
               mem["grads_mb"].get<double>(), mem["optimizer_state_mb"].get<double>(),
               r.sharded ? "ZeRO-1 share" : "replicated");
}

// The stream: epochs over the training split, each in its own seeded order; step s takes global
// samples [s * batch, (s + 1) * batch), rank k the k-th slice of per_rank of them. Returns this
// rank's, indexed by position (what the hidden-state sources count in).
std::vector<TrainSample> rank_samples(const Run& r, int64_t per_rank) {
  std::vector<TrainSample> mine;
  const int64_t total = int64_t(r.cfg.steps) * r.batch;
  int64_t g = 0;
  for (int64_t epoch = 0; g < total; ++epoch) {
    std::vector<size_t> order(r.train.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(r.cfg.seed * 7919 + uint64_t(epoch));
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < order.size() && g < total; ++i, ++g) {
      if ((g % r.batch) / per_rank != r.rank) continue;
      mine.push_back(r.train[order[i]]);
      mine.back().index = int64_t(mine.size()) - 1;
    }
  }
  return mine;
}

// Target inference for this rank's samples from the resume point on: threads in this process,
// or ZeroMQ workers (each rank binds the configured port plus LOCAL_RANK).
std::unique_ptr<HiddenSource> open_hidden_source(Run& r, const DistEnv& env, ThreadPool& pool,
                                                 std::vector<TrainSample>& mine, int64_t per_rank) {
  const TrainConfig& cfg = r.cfg;
  const int64_t first = r.step * per_rank, mine_total = int64_t(cfg.steps) * per_rank;
  if (cfg.inference_mode != "zmq")
    return make_thread_source(pool, *r.bundle.model, mine, r.aux, first, mine_total, cfg.inference_workers, cfg.queue_size);
  std::string endpoint = cfg.zmq_endpoint;
  if (r.world > 1) {
    const size_t colon = endpoint.rfind(':');
    EAGLET_CHECK(colon != std::string::npos, "config: inference.endpoint '{}' has no port", endpoint);
    endpoint = endpoint.substr(0, colon + 1) + std::to_string(std::stoi(endpoint.substr(colon + 1)) + env.local_rank);
  }
  return make_zmq_source(endpoint, mine, r.aux, r.bundle.model->config().hidden, first, mine_total, cfg.queue_size,
                         cfg.worker_timeout_s);
}

// The training loop's state between steps.
struct Loop {
  HiddenSource& source;
  GradientSync* sync;
  const TrainHooks& hooks;
  int64_t per_rank, start_step;
  MetricsLog& metrics;
  Progress progress;
  double train_seconds = 0;
  int64_t tokens = 0;
};

// One optimiser step over the next global batch. Returns whether the ranks agreed to stop after it.
bool train_step(Run& r, Loop& l, TttResult& res) {
  const TrainConfig& cfg = r.cfg;
  std::vector<HiddenSample> local(static_cast<size_t>(l.per_rank));
  for (auto& s : local)
    if (!l.source.take(&s)) fail("hidden-state stream ended early at sample {}", r.step * r.batch);
  const auto t0 = clock_type::now();
  TttBatch b = make_batch(*r.train_pool, *r.bundle.model, local, loss_mask_alignment(cfg));
  // One small all-reduce carries the loss denominators of the global batch and whether any rank
  // was asked to stop (so all stop after the same step).
  const bool stop_asked = (l.hooks.stop_after_steps > 0 && r.step + 1 - l.start_step >= l.hooks.stop_after_steps) ||
                          (l.hooks.stop_flag && l.hooks.stop_flag->load());
  r.draft->prepare(b, r.step * r.batch + int64_t(r.rank) * l.per_rank);
  std::vector<double> denoms;  // one rank: the objective counts its own (the same numbers)
  bool stop = stop_asked;
  if (r.pg) {
    denoms = r.draft->denominators(b);
    denoms.push_back(stop_asked ? 1 : 0);
    sum_over_ranks(r, denoms);
    stop = denoms.back() > 0;
    denoms.pop_back();
  }
  if (r.optim)
    for (auto& group : r.optim->param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_at(cfg, r.step));
  r.draft->module().zero_grad();
  // bf16 compute: autocast runs the matmuls in BF16 while the weights (and AdamW) stay FP32;
  // softmax and the loss are computed in FP32 inside the objective either way.
  at::autocast::set_cpu_enabled(cfg.bf16);
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  res = r.draft->loss(b, r.pg ? &denoms : nullptr);
  at::autocast::set_cpu_enabled(false);
  at::autocast::clear_cache();
  res.loss.backward();
  if (l.sync) l.sync->finish();  // gradients now summed over the ranks: the global batch's
  torch::nn::utils::clip_grad_norm_(r.params, cfg.grad_clip);
  if (r.optim) r.optim->step();
  if (r.sharded) share_parameters(r);
  ++r.step;
  l.train_seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
  for (auto& s : local) l.tokens += int64_t(s.ids.size());
  return stop;
}

// Loss, accuracy and throughput summed over the ranks: the progress line and a metrics record.
void log_step(Run& r, Loop& l, const TttResult& res) {
  const TrainConfig& cfg = r.cfg;
  std::vector<double> c = res.step_correct;
  c.insert(c.end(), res.step_valid.begin(), res.step_valid.end());
  c.insert(c.end(), {res.accepted, res.drafts, res.loss.item<double>(), double(l.tokens)});
  sum_over_ranks(r, c);
  const Eval e = from_counts(r, c);
  const std::vector<double>& acc = e.accuracy;
  const double loss = c[c.size() - 2], tokens = c.back();
  const auto st = l.source.stats();
  const double el = std::max(1e-9, l.progress.elapsed());
  const double samples_per_second = double(r.step - l.start_step) * double(r.batch) / el;
  l.progress.update(r.step, fmt::format("loss {:.3f} | acc {} | lr {:.2e} | {:.0f} tok/s | {:.1f} samples/s | queue {} | "
                                        "trainer idle {:.0f}%", loss, fmt_acc(acc), lr_at(cfg, r.step - 1), tokens / el,
                                        samples_per_second, st.depth, 100 * st.trainer_wait_seconds / el), 0.0);
  l.metrics.write({{"kind", "train"}, {"step", r.step}, {"loss", loss}, {"accuracy", acc},
                   {"simulated_acceptance", e.acceptance}, {"lr", lr_at(cfg, r.step - 1)},
                   {"tokens_per_second", tokens / el}, {"samples_per_second", samples_per_second},
                   {"queue_depth", st.depth}, {"trainer_busy", l.train_seconds / el},
                   {"trainer_idle", st.trainer_wait_seconds / el}, {"workers_busy_seconds", st.worker_busy_seconds},
                   {"workers_blocked_seconds", st.worker_wait_seconds}, {"ranks", r.world}});
}

void log_eval(const Run& r, MetricsLog& metrics, const Eval& e, const std::string& what) {
  spdlog::info("eval {}: per-step accuracy {} | {} {:.2f}", what, fmt_acc(e.accuracy), r.draft->acceptance_label(),
               e.acceptance);
  metrics.write({{"kind", "eval"}, {"step", r.step}, {"accuracy", e.accuracy}, {"simulated_acceptance", e.acceptance}});
}

// Steps until the configured count or a stop; checkpoints on save_every, the last step and a stop.
void train_loop(Run& r, Loop& l, const std::vector<HiddenSample>& eval_hidden) {
  const TrainConfig& cfg = r.cfg;
  r.draft->module().train();
  while (r.step < cfg.steps) {
    if (r.pg) r.pg->at_step(r.step);
    TttResult res;
    const bool stop = train_step(r, l, res);
    if (r.step % cfg.log_every == 0 || r.step == cfg.steps) log_step(r, l, res);
    if (cfg.eval_every > 0 && r.step % cfg.eval_every == 0 && r.step < cfg.steps)
      log_eval(r, l.metrics, evaluate(r, eval_hidden), fmt::format("at step {}", r.step));
    if (r.step % cfg.save_every == 0 || r.step == cfg.steps || stop) save_checkpoint(r);
    if (stop) {
      spdlog::info("stopping at step {} (checkpoint saved; run again to resume)", r.step);
      break;
    }
  }
}

// The final evaluation, the peak memory, the curves and (after the last step) the export.
TrainSummary finish_training(Run& r, Loop& l, const std::vector<HiddenSample>& eval_hidden, clock_type::time_point wall0) {
  const TrainConfig& cfg = r.cfg;
  TrainSummary sum;
  sum.stream = l.source.stats();
  sum.steps_done = r.step;
  sum.train_seconds = l.train_seconds;
  sum.wall_seconds = std::chrono::duration<double>(clock_type::now() - wall0).count();
  const double loop_seconds = l.progress.elapsed();
  sum.trainer_busy_fraction = loop_seconds > 0 ? l.train_seconds / loop_seconds : 0;
  const Eval e = evaluate(r, eval_hidden);
  sum.eval_accuracy = e.accuracy;
  sum.eval_simulated_acceptance = e.acceptance;
  sum.acceptance_label = r.draft->acceptance_label();
  log_eval(r, l.metrics, e, fmt::format("(held-out {} samples)", r.eval.size()));
  // Also the ranks' last meeting: none leaves while the others still need it.
  l.metrics.write({{"kind", "memory"}, {"step", r.step}, {"peak_rss_mb_per_rank", per_rank_values(r, peak_rss_mb())}});
  if (r.main()) {
    write_curves_svg(l.metrics.path(), cfg.output_dir + "/curves.svg", r.draft->acceptance_label());
    if (r.step >= cfg.steps) {
      r.draft->write_export(cfg.export_dir());
      sum.export_dir = cfg.export_dir();
      spdlog::info("exported draft to {}", sum.export_dir);
    }
  }
  spdlog::info("stream: produced {} consumed {} | trainer busy {:.0f}% | workers busy {:.1f}s, blocked {:.1f}s",
               sum.stream.produced, sum.stream.consumed, 100 * sum.trainer_busy_fraction, sum.stream.worker_busy_seconds,
               sum.stream.worker_wait_seconds);
  return sum;
}
}  // namespace

TrainSummary run_training(const TrainConfig& config, const TrainHooks& hooks) {
  const auto wall0 = clock_type::now();
  TrainConfig cfg = config;  // num_epochs turns into steps once the data is known
  EAGLET_CHECK(cfg.device == "cpu" || torch::cuda::is_available(),
               "training.device '{}' needs a CUDA build of libtorch; this one is CPU-only", cfg.device);
  const DistEnv env = DistEnv::from_environment();
  ThreadPool inference_pool(cfg.inference_threads);  // every target forward: regeneration, hidden states, eval
  // libtorch's pool only: OpenBLAS keeps its own threads here, which use the inference core while
  // the queue is full and its worker waits (recipe, AMD EPYC Zen 5: 4.45 steps/s, 3.9 with
  // OpenBLAS held to one thread). The online trainer, beside a serving engine, holds both.
  torch::set_num_threads(cfg.train_threads);
  ThreadPool train_pool(cfg.train_threads);
  Run r{cfg, load_bundle(cfg.target)};
  r.train_pool = &train_pool;
  const int64_t per_rank = join_ranks(r, env);
  spdlog::info("target: {}", r.bundle.label());
  if (const int steps = load_data(r, inference_pool); steps > 0) cfg.steps = steps;
  build_draft(r);
  MetricsLog metrics(r.main() ? cfg.output_dir + "/metrics.jsonl" : "");
  report_memory(r, metrics, per_rank);

  std::vector<TrainSample> mine = rank_samples(r, per_rank);
  std::unique_ptr<HiddenSource> source = open_hidden_source(r, env, inference_pool, mine, per_rank);
  std::vector<HiddenSample> eval_hidden;  // this rank's share of the held-out samples
  for (size_t i = size_t(r.rank); i < r.eval.size(); i += size_t(r.world))
    eval_hidden.push_back(compute_hidden(inference_pool, *r.bundle.model, r.eval[i], r.aux));
  std::unique_ptr<GradientSync> sync;
  if (r.pg) sync = std::make_unique<GradientSync>(*r.pg, r.params);
  Loop l{*source, sync.get(), hooks, per_rank, r.step, metrics, Progress("train step", cfg.steps, r.step)};
  train_loop(r, l, eval_hidden);
  source->stop();
  sync.reset();
  return finish_training(r, l, eval_hidden, wall0);
}

DraftModuleOptions draft_module_options(const TrainConfig& c, const ModelConfig& t) {
  return module_options(c, t, c.aux_layers.empty() ? default_aux_layers(t.num_layers) : c.aux_layers);
}

TorchDraftStep torch_draft_step(const std::string& export_dir, const Model& target, const std::vector<int>& tokens,
                                const std::vector<float>& aux) {
  TrainableDraft d = load_trainable_draft(export_dir, target);
  const int64_t T = int64_t(tokens.size());
  torch::NoGradGuard ng;
  auto ids = torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), torch::kLong).view({1, T});
  auto a = torch::from_blob(const_cast<float*>(aux.data()), {1, T, 3 * d.module->opts.config.target_hidden}, torch::kFloat32).clone();
  std::vector<torch::Tensor> keys, values;
  auto [logits, next] = d.module->step(ids, d.module->fuse(a), 0, keys, values);
  auto floats = [](const torch::Tensor& t) {
    auto c = t.contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  };
  return {floats(logits), floats(next)};
}

}  // namespace eaglet
