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

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "io/json_config.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "train/chat_data.h"
#include "train/dataset.h"
#include "train/draft_export.h"
#include "train/draft_module.h"
#include "train/progress.h"
#include "train/regen.h"
#include "train/vocab_mapping.h"

namespace eaglet {

namespace fs = std::filesystem;

namespace {
using clock_type = std::chrono::steady_clock;

torch::Tensor to_tensor(const kernels::WeightView& w) {
  std::vector<float> f(size_t(w.rows * w.cols));
  kernels::to_f32(w.dtype, w.data, f.data(), w.rows * w.cols);
  return torch::from_blob(f.data(), {w.rows, w.cols}, torch::kFloat32).clone();
}

std::vector<int> default_aux_layers(int L) { return {2, L / 2, L - 3}; }

DraftModuleOptions module_options(const TrainConfig& c, const ModelConfig& t) {
  DraftModuleOptions o;
  o.hidden = c.draft.hidden ? c.draft.hidden : t.hidden;
  o.target_hidden = t.hidden;
  o.intermediate = c.draft.intermediate ? c.draft.intermediate : t.intermediate;
  o.num_heads = c.draft.num_heads ? c.draft.num_heads : t.num_heads;
  o.num_kv_heads = c.draft.num_kv_heads ? c.draft.num_kv_heads : t.num_kv_heads;
  o.head_dim = c.draft.head_dim ? c.draft.head_dim : t.head_dim;
  o.vocab = t.vocab;
  o.draft_vocab = c.draft.draft_vocab ? c.draft.draft_vocab : t.vocab;
  o.rms_eps = t.rms_eps;
  EAGLET_CHECK(o.hidden == t.hidden, "config: model.draft.hidden_size {} must equal the target's hidden size {} (the "
               "draft shares the target's embedding)", o.hidden, t.hidden);
  EAGLET_CHECK(o.num_heads % o.num_kv_heads == 0, "config: draft heads must be a multiple of kv heads");
  return o;
}

// Target logits [B, T, V] from last_hidden [B, T, H], with the target's own final norm and
// lm_head (computed here, not streamed), on `pool`.
torch::Tensor target_logits(ThreadPool& pool, const Model& target, const std::vector<HiddenSample>& batch, int64_t T) {
  const int64_t H = target.config().hidden, V = target.config().vocab, B = int64_t(batch.size());
  auto out = torch::zeros({B, T, V}, torch::kFloat32);
  std::vector<float> normed;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = batch[size_t(b)];
    const int64_t n = int64_t(s.ids.size());
    normed.resize(size_t(n * H));
    target.final_norm(s.last.data(), n, normed.data());
    kernels::matmul(pool, normed.data(), n, target.lm_head(), out.data_ptr<float>() + b * T * V);
  }
  return out;
}

TttBatch make_batch(ThreadPool& pool, const Model& target, const std::vector<HiddenSample>& samples) {
  int64_t T = 0;
  for (auto& s : samples) T = std::max<int64_t>(T, int64_t(s.ids.size()));
  const int64_t B = int64_t(samples.size()), A = samples[0].aux.size() / samples[0].ids.size();
  TttBatch b;
  b.ids = torch::zeros({B, T}, torch::kLong);
  b.aux = torch::zeros({B, T, A}, torch::kFloat32);
  b.loss_mask = torch::zeros({B, T}, torch::kFloat32);
  auto ids = b.ids.accessor<int64_t, 2>();
  auto mask = b.loss_mask.accessor<float, 2>();
  for (int64_t i = 0; i < B; ++i) {
    const auto& s = samples[size_t(i)];
    for (size_t t = 0; t < s.ids.size(); ++t) {
      ids[i][int64_t(t)] = s.ids[t];
      mask[i][int64_t(t)] = float(s.loss_mask[t]);
    }
    std::memcpy(b.aux.data_ptr<float>() + i * T * A, s.aux.data(), s.aux.size() * sizeof(float));
  }
  b.target_logits = target_logits(pool, target, samples, T);
  return b;
}

double lr_at(const TrainConfig& c, int64_t step) {
  const int64_t warm = std::max<int64_t>(1, int64_t(c.warmup_ratio * c.steps));
  if (step < warm) return c.lr * double(step + 1) / double(warm);
  const double p = double(step - warm) / double(std::max<int64_t>(1, c.steps - warm));
  return c.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, p)));
}

struct Run {
  const TrainConfig& cfg;
  ModelBundle bundle;
  std::vector<TrainSample> train, eval;
  std::vector<int> aux;
  VocabMapping vmap;
  DraftModule module{nullptr};
  std::unique_ptr<torch::optim::AdamW> optim;
  torch::Tensor d2t_index, in_draft;
  int64_t step = 0;
  ThreadPool* train_pool = nullptr;  // the training thread's kernels (target logits)
};

void save_checkpoint(Run& r) {
  const std::string dir = r.cfg.checkpoint_dir(), tmp = dir + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  torch::save(r.module, tmp + "/model.pt");
  torch::save(*r.optim, tmp + "/optimizer.pt");
  auto gen = at::detail::getDefaultCPUGenerator();
  std::vector<torch::Tensor> rng;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng.push_back(gen.get_state());
  }
  torch::save(rng, tmp + "/rng.pt");
  nlohmann::json state = {{"step", r.step}, {"samples_consumed", r.step * r.cfg.batch_size}, {"d2t", r.vmap.d2t},
                          {"aux_layers", r.aux}, {"config", r.cfg.to_yaml()}};
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
  torch::load(r.module, dir + "/model.pt");
  torch::load(*r.optim, dir + "/optimizer.pt");
  std::vector<torch::Tensor> rng;
  torch::load(rng, dir + "/rng.pt");
  auto gen = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng[0]);
  }
  r.step = state.at("step").get<int64_t>();
  spdlog::info("resumed from {} at step {}", dir, r.step);
  return true;
}

DraftExport make_export(Run& r) {
  const auto& o = r.module->opts;
  const auto& tc = r.bundle.model->config();
  DraftExport d;
  auto put = [&](const std::string& name, const torch::Tensor& t) {
    auto c = t.detach().to(torch::kCPU).to(torch::kFloat32).contiguous();
    DraftExport::Tensor x;
    x.shape = c.sizes().vec();
    x.data.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    d.tensors[name] = std::move(x);
  };
  put("fc.weight", r.module->fc->weight);
  put("layer.self_attn.q_proj.weight", r.module->q_proj->weight);
  put("layer.self_attn.k_proj.weight", r.module->k_proj->weight);
  put("layer.self_attn.v_proj.weight", r.module->v_proj->weight);
  put("layer.self_attn.o_proj.weight", r.module->o_proj->weight);
  put("layer.mlp.gate_proj.weight", r.module->gate_proj->weight);
  put("layer.mlp.up_proj.weight", r.module->up_proj->weight);
  put("layer.mlp.down_proj.weight", r.module->down_proj->weight);
  put("layer.input_layernorm.weight", r.module->input_layernorm);
  put("layer.hidden_norm.weight", r.module->hidden_norm);
  put("layer.post_attention_layernorm.weight", r.module->post_attention_layernorm);
  put("norm.weight", r.module->norm);
  put("lm_head.weight", r.module->lm_head->weight);
  d.hidden = o.hidden;
  d.intermediate = o.intermediate;
  d.num_heads = o.num_heads;
  d.num_kv_heads = o.num_kv_heads;
  d.head_dim = o.head_dim;
  d.vocab = o.vocab;
  d.draft_vocab = o.draft_vocab;
  d.target_hidden = o.target_hidden;
  d.max_position = tc.max_position;
  d.rms_eps = float(o.rms_eps);
  d.rope_theta = o.rope_theta;
  d.aux_layers = r.aux;
  d.vocab_map = r.vmap;
  return d;
}

std::vector<double> evaluate(Run& r, const std::vector<HiddenSample>& eval) {
  std::vector<double> correct(size_t(r.cfg.ttt_steps), 0), valid(size_t(r.cfg.ttt_steps), 0);
  torch::NoGradGuard ng;
  for (size_t b = 0; b < eval.size(); b += size_t(r.cfg.batch_size)) {
    std::vector<HiddenSample> chunk(eval.begin() + long(b), eval.begin() + long(std::min(eval.size(), b + size_t(r.cfg.batch_size))));
    auto res = ttt_forward(r.module, make_batch(*r.train_pool, *r.bundle.model, chunk), r.cfg.ttt_steps, r.cfg.step_weight, r.d2t_index, r.in_draft);
    for (int i = 0; i < r.cfg.ttt_steps; ++i) {
      correct[size_t(i)] += res.step_correct[size_t(i)];
      valid[size_t(i)] += res.step_valid[size_t(i)];
    }
  }
  std::vector<double> acc;
  for (int i = 0; i < r.cfg.ttt_steps; ++i) acc.push_back(valid[size_t(i)] > 0 ? correct[size_t(i)] / valid[size_t(i)] : 0);
  return acc;
}

double simulated_acceptance(const std::vector<double>& acc, int k) {
  double al = 1, prod = 1;
  for (int i = 0; i < std::min<int>(k, int(acc.size())); ++i) {
    prod *= acc[size_t(i)];
    al += prod;
  }
  return al;
}

std::string fmt_acc(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.3f}", s.empty() ? "" : " ", x);
  return s;
}
}  // namespace

TrainSummary run_training(const TrainConfig& cfg, const TrainHooks& hooks) {
  const auto wall0 = clock_type::now();
  EAGLET_CHECK(cfg.device == "cpu" || torch::cuda::is_available(),
               "training.device '{}' needs a CUDA build of libtorch; this one is CPU-only", cfg.device);
  fs::create_directories(cfg.output_dir);
  std::ofstream(cfg.output_dir + "/config.yaml") << cfg.to_yaml();
  ThreadPool inference_pool(cfg.inference_threads);  // every target forward: regeneration, hidden states, eval
  torch::set_num_threads(cfg.train_threads);
  ThreadPool train_pool(cfg.train_threads);
  Run r{cfg, load_bundle(cfg.target), {}, {}, {}, {}, nullptr, nullptr, {}, {}, 0, &train_pool};
  Model& target = *r.bundle.model;
  const auto& tc = target.config();
  spdlog::info("target: {}", r.bundle.label());

  // Data: regenerate with the target, or take the texts as they are.
  std::vector<TrainSample> all;
  EAGLET_CHECK(!cfg.data_path.empty(), "config: data.path is required");
  if (cfg.regen) {
    RegenOptions ro{cfg.data_path, cfg.regen_path(), cfg.num_samples, cfg.regen_temperature,
                    cfg.regen_max_new_tokens, cfg.regen_prefix_tokens, cfg.regen_batch,
                    cfg.regen_samples_per_prompt, cfg.seed};
    regenerate(inference_pool, target, r.bundle.tokenizer, r.bundle.eos_ids, ro);
    all = load_regenerated(cfg.regen_path(), cfg.max_length, tc.vocab);
  } else if (cfg.data_path.size() > 6 && cfg.data_path.compare(cfg.data_path.size() - 6, 6, ".jsonl") == 0 &&
             read_text_file(cfg.data_path).find("\"input_ids\"") != std::string::npos) {
    all = load_regenerated(cfg.data_path, cfg.max_length, tc.vocab);
  } else if (is_chat_file(cfg.data_path)) {
    auto tmpl = ChatTemplate::from_tokenizer_config(r.bundle.tokenizer.config());
    EAGLET_CHECK(tmpl != nullptr, "{}: chat data needs the target's chat_template (tokenizer_config.json has none)",
                 cfg.data_path);
    for (auto& c : load_conversations(cfg.data_path, cfg.num_samples))
      all.push_back(render_conversation(c, *tmpl, r.bundle.tokenizer, cfg.max_length));
  } else {
    all = tokenize_texts(load_texts(cfg.data_path, cfg.num_samples), r.bundle.tokenizer, cfg.max_length);
  }
  EAGLET_CHECK(int(all.size()) > cfg.eval_samples, "{}: {} samples leave none for training after {} held out",
               cfg.data_path, all.size(), cfg.eval_samples);
  r.eval.assign(all.end() - cfg.eval_samples, all.end());
  r.train.assign(all.begin(), all.end() - cfg.eval_samples);

  r.aux = cfg.aux_layers.empty() ? default_aux_layers(tc.num_layers) : cfg.aux_layers;
  std::sort(r.aux.begin(), r.aux.end());
  for (int a : r.aux) EAGLET_CHECK(a >= 0 && a <= tc.num_layers, "config: aux layer {} outside [0, {}]", a, tc.num_layers);
  EAGLET_CHECK(r.aux.size() == 3, "config: model.aux_layers needs 3 ids");
  spdlog::info("aux layers (residual stream entering layer): {}, {}, {}", r.aux[0], r.aux[1], r.aux[2]);

  DraftModuleOptions mo = module_options(cfg, tc);
  if (mo.draft_vocab < mo.vocab) r.vmap = build_vocab_mapping(r.train, mo.vocab, mo.draft_vocab);
  else r.vmap.t2d.assign(size_t(mo.vocab), 1);
  std::vector<int64_t> d2t_ids(size_t(mo.draft_vocab));
  for (int i = 0; i < mo.draft_vocab; ++i) d2t_ids[size_t(i)] = i + (r.vmap.d2t.empty() ? 0 : r.vmap.d2t[size_t(i)]);
  r.d2t_index = torch::tensor(d2t_ids, torch::kLong);
  r.in_draft = torch::tensor(std::vector<uint8_t>(r.vmap.t2d.begin(), r.vmap.t2d.end())).to(torch::kBool);

  torch::manual_seed(int64_t(cfg.seed));
  r.module = DraftModule(mo);
  {
    torch::NoGradGuard ng;
    r.module->embed.copy_(to_tensor(target.embed_view()));
    if (cfg.lm_head != "train") r.module->lm_head->weight.copy_(to_tensor(target.lm_head()).index_select(0, r.d2t_index));
  }
  if (cfg.lm_head == "frozen-target") r.module->lm_head->weight.set_requires_grad(false);
  std::vector<torch::Tensor> params;
  for (auto& p : r.module->parameters())
    if (p.requires_grad()) params.push_back(p);
  r.optim = std::make_unique<torch::optim::AdamW>(
      params, torch::optim::AdamWOptions(cfg.lr).betas({0.9, 0.95}).weight_decay(0.0));
  load_checkpoint(r);

  // The stream: epochs over the training split, each in its own seeded order.
  std::vector<TrainSample> stream;
  const int64_t total = int64_t(cfg.steps) * cfg.batch_size;
  for (int64_t epoch = 0; int64_t(stream.size()) < total; ++epoch) {
    std::vector<size_t> order(r.train.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(cfg.seed * 7919 + uint64_t(epoch));
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      if (int64_t(stream.size()) >= total) break;
      TrainSample s = r.train[i];
      s.index = int64_t(stream.size());
      stream.push_back(std::move(s));
    }
  }
  const int64_t first = r.step * cfg.batch_size;
  std::unique_ptr<HiddenSource> source =
      cfg.inference_mode == "zmq"
          ? make_zmq_source(cfg.zmq_endpoint, stream, r.aux, tc.hidden, first, total, cfg.queue_size, cfg.worker_timeout_s)
          : make_thread_source(inference_pool, target, stream, r.aux, first, total, cfg.inference_workers, cfg.queue_size);
  std::vector<HiddenSample> eval_hidden;
  for (auto& s : r.eval) eval_hidden.push_back(compute_hidden(inference_pool, target, s, r.aux));

  TrainSummary sum;
  Progress progress("train step", cfg.steps, r.step);
  double train_seconds = 0;
  int64_t tokens = 0;
  const int64_t start_step = r.step;
  r.module->train();
  while (r.step < cfg.steps) {
    std::vector<HiddenSample> batch(size_t(cfg.batch_size));
    for (auto& s : batch)
      if (!source->take(&s)) fail("hidden-state stream ended early at sample {}", r.step * cfg.batch_size);
    const auto t0 = clock_type::now();
    TttBatch b = make_batch(train_pool, target, batch);
    for (auto& group : r.optim->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_at(cfg, r.step));
    r.optim->zero_grad();
    // bf16 compute: autocast runs the matmuls in BF16 while the weights (and AdamW) stay FP32;
    // softmax and the loss are computed in FP32 inside ttt_forward either way.
    at::autocast::set_cpu_enabled(cfg.bf16);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    TttResult res = ttt_forward(r.module, b, cfg.ttt_steps, cfg.step_weight, r.d2t_index, r.in_draft);
    at::autocast::set_cpu_enabled(false);
    at::autocast::clear_cache();
    res.loss.backward();
    torch::nn::utils::clip_grad_norm_(params, cfg.grad_clip);
    r.optim->step();
    ++r.step;
    train_seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
    for (auto& s : batch) tokens += int64_t(s.ids.size());
    if (r.step % cfg.log_every == 0 || r.step == cfg.steps) {
      std::vector<double> acc;
      for (int i = 0; i < cfg.ttt_steps; ++i) acc.push_back(res.step_valid[size_t(i)] > 0 ? res.step_correct[size_t(i)] / res.step_valid[size_t(i)] : 0);
      const auto st = source->stats();
      progress.update(r.step, fmt::format("loss {:.3f} | acc {} | lr {:.2e} | {:.0f} tok/s | queue {} | trainer idle {:.0f}%",
                                          res.loss.item<double>(), fmt_acc(acc), lr_at(cfg, r.step - 1),
                                          tokens / std::max(1e-9, progress.elapsed()), st.depth,
                                          100 * st.trainer_wait_seconds / std::max(1e-9, progress.elapsed())), 0.0);
    }
    const bool stop = (hooks.stop_after_steps > 0 && r.step - start_step >= hooks.stop_after_steps) ||
                      (hooks.stop_flag && hooks.stop_flag->load());
    if (r.step % cfg.save_every == 0 || r.step == cfg.steps || stop) save_checkpoint(r);
    if (stop) {
      spdlog::info("stopping at step {} (checkpoint saved; run again to resume)", r.step);
      break;
    }
  }
  source->stop();
  sum.stream = source->stats();
  sum.steps_done = r.step;
  sum.train_seconds = train_seconds;
  sum.wall_seconds = std::chrono::duration<double>(clock_type::now() - wall0).count();
  const double loop_seconds = progress.elapsed();
  sum.trainer_busy_fraction = loop_seconds > 0 ? train_seconds / loop_seconds : 0;
  r.module->eval();
  sum.eval_accuracy = evaluate(r, eval_hidden);
  sum.eval_simulated_acceptance = simulated_acceptance(sum.eval_accuracy, 3);
  spdlog::info("eval (held-out {} samples): per-step accuracy {} | simulated acceptance length (k=3) {:.2f}",
               r.eval.size(), fmt_acc(sum.eval_accuracy), sum.eval_simulated_acceptance);
  if (r.step >= cfg.steps) {
    write_draft_export(cfg.export_dir(), make_export(r), cfg.key_style);
    sum.export_dir = cfg.export_dir();
    spdlog::info("exported draft to {}", sum.export_dir);
  }
  spdlog::info("stream: produced {} consumed {} | trainer busy {:.0f}% | workers busy {:.1f}s, blocked {:.1f}s",
               sum.stream.produced, sum.stream.consumed, 100 * sum.trainer_busy_fraction, sum.stream.worker_busy_seconds,
               sum.stream.worker_wait_seconds);
  return sum;
}

std::vector<float> torch_draft_logits(const std::string& export_dir, const Model& target, const std::vector<int>& tokens,
                                      const std::vector<float>& aux) {
  JsonConfig cfg = JsonConfig::load(export_dir + "/config.json");
  DraftModuleOptions o;
  o.hidden = int(cfg.get_int("hidden_size"));
  o.target_hidden = int(cfg.get_int("target_hidden_size", o.hidden));
  o.intermediate = int(cfg.get_int("intermediate_size"));
  o.num_heads = int(cfg.get_int("num_attention_heads"));
  o.num_kv_heads = int(cfg.get_int("num_key_value_heads"));
  o.head_dim = int(cfg.get_int("head_dim"));
  o.vocab = int(cfg.get_int("vocab_size"));
  o.draft_vocab = int(cfg.get_int("draft_vocab_size"));
  o.rms_eps = cfg.get_double("rms_norm_eps");
  o.rope_theta = cfg.get_double("rope_theta");
  DraftModule m(o);
  Checkpoint ck = Checkpoint::open_dir(export_dir);
  const std::string P = ck.has("midlayer.fc.weight") || ck.has("midlayer.hidden_norm.weight") ? "midlayer." : "layers.0.";
  auto load = [&](const std::string& name) {
    const TensorInfo& t = ck.get(name);
    std::vector<float> f(size_t(t.numel()));
    kernels::to_f32(t.dtype, t.data, f.data(), t.numel());
    return torch::from_blob(f.data(), t.shape, torch::kFloat32).clone();
  };
  torch::NoGradGuard ng;
  m->fc->weight.copy_(load("fc.weight"));
  m->q_proj->weight.copy_(load(P + "self_attn.q_proj.weight"));
  m->k_proj->weight.copy_(load(P + "self_attn.k_proj.weight"));
  m->v_proj->weight.copy_(load(P + "self_attn.v_proj.weight"));
  m->o_proj->weight.copy_(load(P + "self_attn.o_proj.weight"));
  m->gate_proj->weight.copy_(load(P + "mlp.gate_proj.weight"));
  m->up_proj->weight.copy_(load(P + "mlp.up_proj.weight"));
  m->down_proj->weight.copy_(load(P + "mlp.down_proj.weight"));
  m->input_layernorm.copy_(load(P + "input_layernorm.weight"));
  m->hidden_norm.copy_(load(P + "hidden_norm.weight"));
  m->post_attention_layernorm.copy_(load(P + "post_attention_layernorm.weight"));
  m->norm.copy_(load("norm.weight"));
  m->lm_head->weight.copy_(load("lm_head.weight"));
  m->embed.copy_(to_tensor(target.embed_view()));
  const int64_t T = int64_t(tokens.size());
  auto ids = torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), torch::kLong).view({1, T});
  auto a = torch::from_blob(const_cast<float*>(aux.data()), {1, T, 3 * o.target_hidden}, torch::kFloat32).clone();
  std::vector<torch::Tensor> keys, values;
  auto [logits, out] = m->step(ids, m->fuse(a), 0, keys, values);
  auto c = logits.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace eaglet
