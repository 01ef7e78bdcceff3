#include "train/draft_io.h"

#include <cstring>

#include "core/error.h"
#include "io/json_config.h"
#include "io/safetensors.h"
#include "kernels/pack.h"
#include "models/eagle3_config.h"
#include "models/eagle3_schema.h"
#include "models/rope.h"

namespace eaglet {

torch::Tensor weight_tensor(const kernels::WeightView& w) {
  auto t = torch::empty({w.rows, w.cols}, torch::kFloat32);
  for (int64_t r = 0; r < w.rows; ++r) kernels::read_row(w, r, t.data_ptr<float>() + r * w.cols);
  return t;
}

namespace {

// The module's trained tensors by their checkpoint names (layer tensors under `prefix`), in the
// order the export writes them: what loading fills and exporting writes. The embedding is the
// target's (frozen, not exported); lm_head loads from the checkpoint or the target's rows.
std::vector<std::pair<std::string, torch::Tensor>> named_tensors(const DraftModule& m, const std::string& prefix) {
  using T = eagle3::Tensor;
  using L = LayerTensor;
  auto layer = [&](L t) { return prefix + layer_tensor_name(t, Naming::HuggingFace); };
  std::vector<std::pair<std::string, torch::Tensor>> named = {
      {eagle3::spec(T::Fc).hf, m->fc->weight},
      {layer(L::Q), m->q_proj->weight},
      {layer(L::K), m->k_proj->weight},
      {layer(L::V), m->v_proj->weight},
      {layer(L::O), m->o_proj->weight},
      {layer(L::Gate), m->gate_proj->weight},
      {layer(L::Up), m->up_proj->weight},
      {layer(L::Down), m->down_proj->weight},
      {layer(L::AttnNorm), m->input_layernorm},
      {prefix + eagle3::spec(T::HiddenNorm).hf, m->hidden_norm},
      {layer(L::MlpNorm), m->post_attention_layernorm},
      {eagle3::spec(T::Norm).hf, m->norm}};
  for (size_t i = 0; i < m->fc_norms.size(); ++i)
    named.emplace_back(eagle3::spec(T(int(T::FcNorm0) + int(i))).hf, m->fc_norms[i]);
  return named;
}

// Target logits [B, T, V] from last_hidden [B, T, H], with the target's own final norm and
// lm_head (computed here, not streamed), on `pool`.
torch::Tensor target_logits(ThreadPool& pool, const Model& target, const std::vector<const HiddenSample*>& batch,
                            int64_t T) {
  const int64_t H = target.config().hidden, V = target.config().vocab, B = int64_t(batch.size());
  auto out = torch::zeros({B, T, V}, torch::kFloat32);
  std::vector<float> normed;
  for (int64_t b = 0; b < B; ++b) {
    const HiddenSample& s = *batch[size_t(b)];
    const int64_t n = int64_t(s.ids.size());
    normed.resize(size_t(n * H));
    target.final_norm(s.last.data(), n, normed.data());
    kernels::matmul(pool, normed.data(), n, target.lm_head(), out.data_ptr<float>() + b * T * V);
  }
  return out;
}

}  // namespace

TttBatch make_batch(ThreadPool& pool, const Model& target, const std::vector<HiddenSample>& samples,
                    LossMaskAlignment alignment) {
  std::vector<const HiddenSample*> p;
  for (const HiddenSample& s : samples) p.push_back(&s);
  return make_batch(pool, target, p, alignment);
}

TttBatch make_batch(ThreadPool& pool, const Model& target, const std::vector<const HiddenSample*>& samples,
                    LossMaskAlignment alignment) {
  int64_t T = 0;
  for (const HiddenSample* s : samples) T = std::max<int64_t>(T, int64_t(s->ids.size()));
  const int64_t B = int64_t(samples.size()), A = int64_t(samples[0]->aux.size() / samples[0]->ids.size());
  TttBatch b;
  b.ids = torch::zeros({B, T}, torch::kLong);
  b.aux = torch::zeros({B, T, A}, torch::kFloat32);
  b.loss_mask = torch::zeros({B, T}, torch::kFloat32);
  b.valid = torch::zeros({B, T}, torch::kFloat32);
  b.alignment = alignment;
  auto ids = b.ids.accessor<int64_t, 2>();
  auto mask = b.loss_mask.accessor<float, 2>();
  auto valid = b.valid.accessor<float, 2>();
  for (int64_t i = 0; i < B; ++i) {
    const HiddenSample& s = *samples[size_t(i)];
    for (size_t t = 0; t < s.ids.size(); ++t) {
      ids[i][int64_t(t)] = s.ids[t];
      mask[i][int64_t(t)] = float(s.loss_mask[t]);
      valid[i][int64_t(t)] = 1.0f;
    }
    std::memcpy(b.aux.data_ptr<float>() + i * T * A, s.aux.data(), s.aux.size() * sizeof(float));
  }
  b.target_logits = target_logits(pool, target, samples, T);
  return b;
}

TrainableDraft load_trainable_draft(const std::string& dir, const Model& target) {
  const JsonConfig top = JsonConfig::load(dir + "/config.json");
  const Eagle3Config c = parse_eagle3_config(top, target.config().num_layers);
  const char* unsupported = c.num_layers != 1                         ? "num_hidden_layers != 1"
                            : c.layer != Eagle3Layer::Llama            ? "a Qwen3 decoder layer"
                            : c.norm_before_fc                         ? "norm_before_fc"
                            : c.norm_before_residual                   ? "norm_before_residual"
                            : c.attention_bias                         ? "attention_bias"
                            : c.target_hidden != target.config().hidden ? "a target_hidden_size other than the target's"
                                                                       : nullptr;
  if (unsupported)
    fail("{}: the trainer's draft module is EAGLE-3 or EAGLE-3.1 (one Llama layer); this draft has {}", dir, unsupported);
  // As the engine reads it: the same config and RoPE.
  const DraftModuleOptions opts{c, Rope::from_config(eagle3_layer_config(top), c.head_dim)};
  const Eagle3Config& o = opts.config;
  TrainableDraft d;
  d.module = DraftModule(opts);
  const Checkpoint ck = Checkpoint::open_dir(dir);
  const std::string P = eagle3::first_layer_prefix([&](const std::string& n) { return ck.has(n); });
  EAGLET_CHECK(!P.empty(), "{}: no layer 0 ('{}*' or '{}*' tensors)", dir, eagle3::kMidlayer, eagle3::kLayer0);
  auto load = [&](const std::string& name, std::vector<int64_t> shape) {
    const TensorInfo& t = ck.get(name, shape);
    std::vector<float> f(size_t(t.numel()));
    kernels::to_f32(t.dtype, t.data, f.data(), t.numel());
    return torch::from_blob(f.data(), t.shape, torch::kFloat32).clone();
  };
  auto& m = d.module;
  torch::NoGradGuard ng;
  for (auto& [name, t] : named_tensors(m, P)) t.copy_(load(name, t.sizes().vec()));  // the module's shapes are the config's
  const std::string embed = eagle3::spec(eagle3::Tensor::Embed).hf, head = eagle3::spec(eagle3::Tensor::LmHead).hf;
  m->embed.copy_(ck.has(embed) ? load(embed, m->embed.sizes().vec()) : weight_tensor(target.embed_view()));
  // The vocabulary map: d2t offsets when the draft vocabulary is pruned.
  std::vector<int64_t> ids(size_t(o.draft_vocab));
  for (int i = 0; i < o.draft_vocab; ++i) ids[size_t(i)] = i;
  if (const std::string d2t = eagle3::spec(eagle3::Tensor::D2t).hf; ck.has(d2t)) {
    const TensorInfo& t = ck.get(d2t, {o.draft_vocab}, {DType::I64});
    d.vocab_map.d2t.assign(reinterpret_cast<const int64_t*>(t.data), reinterpret_cast<const int64_t*>(t.data) + o.draft_vocab);
    for (int i = 0; i < o.draft_vocab; ++i) ids[size_t(i)] += d.vocab_map.d2t[size_t(i)];
  }
  d.vocab_map.t2d.assign(size_t(o.vocab), 0);
  for (int64_t id : ids) {
    EAGLET_CHECK(id >= 0 && id < o.vocab, "{}: d2t maps outside the vocabulary", dir);
    d.vocab_map.t2d[size_t(id)] = 1;
  }
  m->lm_head->weight.copy_(ck.has(head) ? load(head, {o.draft_vocab, o.hidden})
                                                    : weight_tensor(target.lm_head()).index_select(0, torch::tensor(ids)));
  d.d2t_index = torch::tensor(ids, torch::kLong);
  d.in_draft = torch::tensor(std::vector<uint8_t>(d.vocab_map.t2d.begin(), d.vocab_map.t2d.end())).to(torch::kBool);
  return d;
}

DraftExport export_module(const DraftModule& m, const ModelConfig& tc, const VocabMapping& vmap) {
  DraftExport d;
  auto put = [&](const std::string& name, const torch::Tensor& t) {
    auto c = t.detach().to(torch::kCPU).to(torch::kFloat32).contiguous();
    DraftExport::Tensor x;
    x.shape = c.sizes().vec();
    x.data.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    d.tensors[name] = std::move(x);
  };
  for (auto& [name, t] : named_tensors(m, DraftExport::kLayerPrefix)) put(name, t);
  put(eagle3::spec(eagle3::Tensor::LmHead).hf, m->lm_head->weight);
  d.config = m->opts.config;
  d.rope = m->opts.rope;
  d.max_position = tc.max_position;
  d.vocab_map = vmap;
  return d;
}

std::vector<double> ttt_accuracy(DraftModule& m, const torch::Tensor& d2t_index, const torch::Tensor& in_draft,
                                 ThreadPool& pool, const Model& target,
                                 const std::vector<HiddenSample>& samples, int steps, int batch_size,
                                 LossMaskAlignment alignment, std::vector<double>* counts_out) {
  std::vector<double> counts(size_t(2 * steps), 0);  // correct per step, then valid per step
  torch::NoGradGuard ng;
  const bool was_training = m->is_training();
  m->eval();
  for (size_t b = 0; b < samples.size(); b += size_t(batch_size)) {
    std::vector<const HiddenSample*> chunk;
    for (size_t i = b; i < std::min(samples.size(), b + size_t(batch_size)); ++i) chunk.push_back(&samples[i]);
    auto res = ttt_forward(m, make_batch(pool, target, chunk, alignment), steps, 1.0, d2t_index, in_draft);
    for (int i = 0; i < steps; ++i) {
      counts[size_t(i)] += res.step_correct[size_t(i)];
      counts[size_t(steps + i)] += res.step_valid[size_t(i)];
    }
  }
  if (was_training) m->train();
  if (counts_out) *counts_out = counts;
  std::vector<double> acc;
  for (int i = 0; i < steps; ++i)
    acc.push_back(counts[size_t(steps + i)] > 0 ? counts[size_t(i)] / counts[size_t(steps + i)] : 0);
  return acc;
}

}  // namespace eaglet
