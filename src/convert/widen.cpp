#include "convert/widen.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/splitmix.h"
#include "io/json_config.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "models/dflash.h"
#include "models/eagle3.h"
#include "models/eagle3_schema.h"
#include "models/layer_weights.h"

namespace eaglet {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A row-major float matrix (vectors are one row) under construction.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
  float& at(int64_t r, int64_t c) { return v[size_t(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return v[size_t(r * cols + c)]; }
};

// Uniform filler with the requested standard deviation, seeded per tensor so the output does not
// depend on the order tensors are written in. splitmix64: fast enough for a billion weights.
Mat filler(int64_t rows, int64_t cols, const WidenShape& s, const std::string& name) {
  Mat m{rows, cols, std::vector<float>(size_t(rows * cols), 0.0f)};
  if (s.noise == 0) return m;
  uint64_t x = s.seed ^ std::hash<std::string>{}(name);
  const float a = s.noise * std::sqrt(3.0f) / float(1u << 31);
  for (float& f : m.v) f = float(int32_t(uint32_t(splitmix64(x)))) * a;
  return m;
}
// A decoder layer tensor's Hugging Face name, after the layer prefix.
std::string hf(LayerTensor t) { return layer_tensor_name(t, Naming::HuggingFace); }

Mat zeros(int64_t rows, int64_t cols) { return Mat{rows, cols, std::vector<float>(size_t(rows * cols), 0.0f)}; }

// An original tensor as F32, with its shape checked.
Mat read(const Checkpoint& ck, const std::string& name, int64_t rows, int64_t cols) {
  std::vector<int64_t> shape = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
  const TensorInfo& t = ck.get(name, shape, {DType::F32, DType::BF16, DType::F16});
  Mat m{rows, cols, std::vector<float>(size_t(rows * cols))};
  kernels::to_f32(t.dtype, t.data, m.v.data(), t.numel());
  return m;
}

std::string encode(const Mat& m, DType dtype) {
  std::string out(m.v.size() * dtype_size(dtype), '\0');
  for (size_t i = 0; i < m.v.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &m.v[i], 4);
    } else {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(m.v[i]) : f32_to_f16(m.v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// Tensors to write, each made only when its turn comes.
struct Plan {
  std::vector<TensorHeader> headers;
  std::vector<std::function<std::string()>> make;
  void add(const std::string& name, std::vector<int64_t> shape, DType dtype, std::function<Mat()> f) {
    headers.push_back({name, dtype, std::move(shape)});
    make.push_back([f = std::move(f), dtype] { return encode(f(), dtype); });
  }
  void add_raw(const TensorInfo& t) {
    headers.push_back({t.name, t.dtype, t.shape});
    make.push_back([&t] { return std::string(reinterpret_cast<const char*>(t.data), t.nbytes); });
  }
  void write(const std::string& path) const {
    size_t done = 0;
    write_safetensors_streamed(path, headers, [&](size_t i) {
      if (++done % 32 == 0) spdlog::info("widen: {}/{} tensors", done, headers.size());
      return make[i]();
    }, {{"format", "pt"}});
  }
};

// The head layout of one side of the widening.
struct Heads {
  int heads, kv_heads, head_dim;
  int group() const { return heads / kv_heads; }
};

// Maps an original (head, dim) onto the wide layout; see the header for why these positions.
struct HeadMap {
  Heads small, wide;
  int64_t dim(int j) const {
    const int s = wide.head_dim / small.head_dim, half = small.head_dim / 2;
    return j < half ? int64_t(s) * j : wide.head_dim / 2 + int64_t(s) * (j - half);
  }
  int64_t q_row(int h, int j) const {
    const int H = (h / small.group()) * wide.group() + h % small.group();
    return int64_t(H) * wide.head_dim + dim(j);
  }
  int64_t kv_row(int g, int j) const { return int64_t(g) * wide.head_dim + dim(j); }
};

void check_heads(const Heads& small, const Heads& wide, const std::string& where) {
  if (small.heads % small.kv_heads || wide.heads % wide.kv_heads)
    fail("{}: num_attention_heads must be a multiple of num_key_value_heads", where);
  if (wide.head_dim % small.head_dim || small.head_dim % 2)
    fail("{}: the wide head_dim {} must be a multiple of the original {} (which must be even)", where, wide.head_dim,
         small.head_dim);
  if (wide.kv_heads < small.kv_heads || wide.group() < small.group())
    fail("{}: widening can only add heads: {} kv heads x {} per group cannot hold {} x {}", where, wide.kv_heads,
         wide.group(), small.kv_heads, small.group());
}

// Attention of one layer. `in_cols` lists, for each original input column, its wide column (the
// draft's attention reads [embedding, hidden], two blocks of D).
struct AttnWeights {
  Mat q, k, v, o;
};
// With per-head q/k norms (Qwen3) the live heads' other q dims are zero too, since the norm
// reads them, and the q scale moves into the norm weights (widen_head_norm).
AttnWeights widen_attention(const AttnWeights& a, const HeadMap& hm, const std::vector<int64_t>& in_cols,
                            int64_t wide_in, int64_t D, bool qk_norm, const WidenShape& s, const std::string& prefix) {
  const Heads &sm = hm.small, &wd = hm.wide;
  AttnWeights w{filler(int64_t(wd.heads) * wd.head_dim, wide_in, s, prefix + "q"),
                filler(int64_t(wd.kv_heads) * wd.head_dim, wide_in, s, prefix + "k"),
                filler(int64_t(wd.kv_heads) * wd.head_dim, wide_in, s, prefix + "v"),
                zeros(D, int64_t(wd.heads) * wd.head_dim)};
  const float q_scale = qk_norm ? 1.0f : std::sqrt(float(wd.head_dim) / float(sm.head_dim));
  if (qk_norm)
    for (int h = 0; h < sm.heads; ++h)
      std::fill_n(&w.q.at(hm.q_row(h, 0), 0), int64_t(wd.head_dim) * wide_in, 0.0f);  // dim 0 starts the head
  for (int g = 0; g < sm.kv_heads; ++g) {
    std::fill_n(w.k.v.begin() + int64_t(g) * wd.head_dim * wide_in, int64_t(wd.head_dim) * wide_in, 0.0f);
    for (int j = 0; j < sm.head_dim; ++j)
      for (size_t c = 0; c < in_cols.size(); ++c) {
        w.k.at(hm.kv_row(g, j), in_cols[c]) = a.k.at(int64_t(g) * sm.head_dim + j, int64_t(c));
        w.v.at(hm.kv_row(g, j), in_cols[c]) = a.v.at(int64_t(g) * sm.head_dim + j, int64_t(c));
      }
  }
  for (int h = 0; h < sm.heads; ++h)
    for (int j = 0; j < sm.head_dim; ++j) {
      const int64_t src = int64_t(h) * sm.head_dim + j;
      for (size_t c = 0; c < in_cols.size(); ++c) w.q.at(hm.q_row(h, j), in_cols[c]) = a.q.at(src, int64_t(c)) * q_scale;
      for (int64_t r = 0; r < a.o.rows; ++r) w.o.at(r, hm.q_row(h, j)) = a.o.at(r, src);
    }
  return w;
}

// gate/up: original rows and columns in the corner, filler elsewhere; down: zero elsewhere.
Mat widen_in(const Mat& m, int64_t rows, int64_t cols, const WidenShape& s, const std::string& name) {
  Mat w = filler(rows, cols, s, name);
  for (int64_t r = 0; r < m.rows; ++r) std::copy_n(&m.v[size_t(r * m.cols)], m.cols, &w.at(r, 0));
  return w;
}
Mat widen_out(const Mat& m, int64_t rows, int64_t cols) {
  Mat w = zeros(rows, cols);
  for (int64_t r = 0; r < m.rows; ++r) std::copy_n(&m.v[size_t(r * m.cols)], m.cols, &w.at(r, 0));
  return w;
}
// A norm weight over `blocks` concatenated hidden vectors (the draft's input_norm spans three).
Mat widen_norm(const Mat& m, int64_t d, int64_t D) {
  const float ns = std::sqrt(float(d) / float(D));
  const int64_t blocks = m.cols / d;
  Mat w{1, blocks * D, std::vector<float>(size_t(blocks * D), ns)};
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < d; ++i) w.v[size_t(b * D + i)] = m.v[size_t(b * d + i)] * ns;
  return w;
}

// A per-head q or k norm weight [hd] -> [HD]. A live head keeps hd of its HD dims, so the norm
// makes them sqrt(HD/hd) larger: k keeps that (it stands in for the q scale the larger
// 1/sqrt(HD) needs), q is brought back by the weight. (eps is the model's, scaled for the hidden
// norms by d/D: the head norms' own ratio differs, a change of order eps in the output.)
Mat widen_head_norm(const Mat& m, const HeadMap& hm, bool is_q) {
  const float scale = is_q ? std::sqrt(float(hm.small.head_dim) / float(hm.wide.head_dim)) : 1.0f;
  Mat w{1, hm.wide.head_dim, std::vector<float>(size_t(hm.wide.head_dim), scale)};
  for (int j = 0; j < hm.small.head_dim; ++j) w.v[size_t(hm.dim(j))] = m.v[size_t(j)] * scale;
  return w;
}

void copy_side_files(const std::string& src, const std::string& out) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json",
                        "tokenizer.model", "chat_template.jinja", "vocab.json", "merges.txt"})
    if (fs::exists(fs::path(src) / f))
    {
      fs::copy_file(fs::path(src) / f, fs::path(out) / f, fs::copy_options::overwrite_existing);
      // The source may be read-only (a shared model folder); the copy belongs to the user.
      fs::permissions(fs::path(out) / f, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    }
}

void write_json(const std::string& path, const json& j) {
  std::ofstream o(path);
  o << j.dump(2) << "\n";
  if (!o) fail("{}: cannot write", path);
}

const char* torch_dtype(DType d) { return d == DType::F32 ? "float32" : d == DType::BF16 ? "bfloat16" : "float16"; }

// One decoder layer's matrices: q/k/v/o and the MLP, widened from layer `from` of `ck`, or for a
// new layer ("" from) filler whose outputs meet zero o_proj / down_proj columns.
struct LayerWidening {
  std::shared_ptr<Checkpoint> ck;
  std::string from, to;               // source and destination prefixes
  HeadMap heads;
  int d = 0, I = 0;                   // original hidden and MLP widths
  int64_t D = 0, II = 0;              // wide ones
  std::vector<int64_t> in_cols;       // where the original attention inputs sit in the wide input
  int64_t in_small = 0, in_wide = 0;  // attention input widths
  bool qk_norm = false;               // per-head q_norm / k_norm (Qwen3 layers)
};

void plan_layer(Plan& p, const LayerWidening& l, const WidenShape& s) {
  const Heads &sm = l.heads.small, &wd = l.heads.wide;
  const int64_t qd = int64_t(sm.heads) * sm.head_dim, kvd = int64_t(sm.kv_heads) * sm.head_dim;
  const int64_t QD = int64_t(wd.heads) * wd.head_dim, KVD = int64_t(wd.kv_heads) * wd.head_dim;
  const DType dt = s.dtype;
  // The four attention matrices are made together; each tensor's maker takes its own.
  auto attn = std::make_shared<std::optional<AttnWeights>>();
  auto attention = [=](int which) {
    if (!*attn) {
      if (l.from.empty()) {
        *attn = AttnWeights{filler(QD, l.in_wide, s, l.to + "q"), filler(KVD, l.in_wide, s, l.to + "k"),
                            filler(KVD, l.in_wide, s, l.to + "v"), zeros(l.D, QD)};
      } else {
        const Checkpoint& ck = *l.ck;
        AttnWeights a{read(ck, l.from + hf(LayerTensor::Q), qd, l.in_small), read(ck, l.from + hf(LayerTensor::K), kvd, l.in_small),
                      read(ck, l.from + hf(LayerTensor::V), kvd, l.in_small), read(ck, l.from + hf(LayerTensor::O), l.d, qd)};
        *attn = widen_attention(a, l.heads, l.in_cols, l.in_wide, l.D, l.qk_norm, s, l.to);
      }
    }
    Mat& m = which == 0 ? (*attn)->q : which == 1 ? (*attn)->k : which == 2 ? (*attn)->v : (*attn)->o;
    Mat out = std::move(m);
    if (which == 3) attn->reset();
    return out;
  };
  p.add(l.to + hf(LayerTensor::Q), {QD, l.in_wide}, dt, [=] { return attention(0); });
  p.add(l.to + hf(LayerTensor::K), {KVD, l.in_wide}, dt, [=] { return attention(1); });
  p.add(l.to + hf(LayerTensor::V), {KVD, l.in_wide}, dt, [=] { return attention(2); });
  p.add(l.to + hf(LayerTensor::O), {l.D, QD}, dt, [=] { return attention(3); });
  for (LayerTensor n : {LayerTensor::QNorm, LayerTensor::KNorm})
    if (l.qk_norm)
      p.add(l.to + hf(n), {wd.head_dim}, dt,
            [=] { return widen_head_norm(read(*l.ck, l.from + hf(n), 1, sm.head_dim), l.heads, n == LayerTensor::QNorm); });
  for (LayerTensor m : {LayerTensor::Gate, LayerTensor::Up}) {
    const std::string to = l.to + hf(m), from = l.from + hf(m);
    p.add(to, {l.II, l.D}, dt, [=] {
      return l.from.empty() ? filler(l.II, l.D, s, to) : widen_in(read(*l.ck, from, l.I, l.d), l.II, l.D, s, to);
    });
  }
  const std::string down = hf(LayerTensor::Down);
  p.add(l.to + down, {l.D, l.II}, dt, [=] {
    return l.from.empty() ? zeros(l.D, l.II) : widen_out(read(*l.ck, l.from + down, l.d, l.I), l.D, l.II);
  });
}

// The original Llama's widths, checked for what widening supports (bias-free Llama layers that
// only grow).
struct SmallLlama {
  int d, L, I, V;
  Heads heads;
};

SmallLlama read_small_llama(const JsonConfig& cfg, const WidenShape& s) {
  const std::string& where = cfg.where();
  const std::string arch = cfg.has("architectures") ? cfg.raw()["architectures"][0].get<std::string>() : "";
  if (arch != "LlamaForCausalLM") fail("{}: architectures is '{}'; widening supports LlamaForCausalLM", where, arch);
  for (const char* k : {"attention_bias", "mlp_bias"})
    if (cfg.get_bool(k, false)) fail("{}: {} is true; widening supports bias-free Llama layers", where, k);
  if (cfg.has("partial_rotary_factor")) fail("{}: partial_rotary_factor is not supported by widening", where);
  SmallLlama m{cfg.get_size("hidden_size"), cfg.get_size("num_hidden_layers"), cfg.get_size("intermediate_size"),
               cfg.get_size("vocab_size"), {}};
  const int heads = cfg.get_size("num_attention_heads");
  m.heads = Heads{heads, cfg.get_size("num_key_value_heads", heads), cfg.get_size("head_dim", m.d / heads)};
  check_heads(m.heads, Heads{s.heads, s.kv_heads, s.head_dim}, where);
  if (s.hidden < m.d || s.intermediate < m.I || s.layers < m.L)
    fail("{}: widening can only grow: hidden {} -> {}, intermediate {} -> {}, layers {} -> {}", where, m.d, s.hidden,
         m.I, s.intermediate, m.L, s.layers);
  return m;
}

}  // namespace

std::vector<int> widened_live_layers(int L, int LL) {
  std::vector<int> live;
  for (int i = 0; i < L; ++i) live.push_back(L == 1 ? LL - 1 : int(std::lround(double(i) * (LL - 1) / (L - 1))));
  return live;
}

void widen_llama(const std::string& src_dir, const std::string& out_dir, const WidenShape& s) {
  const JsonConfig cfg = JsonConfig::load(src_dir + "/config.json");
  const SmallLlama sm = read_small_llama(cfg, s);
  const int d = sm.d, L = sm.L, V = sm.V;
  const int64_t D = s.hidden;
  const Heads wd{s.heads, s.kv_heads, s.head_dim};
  const std::vector<int> live = widened_live_layers(L, s.layers);
  auto ck = std::make_shared<Checkpoint>(Checkpoint::open_dir(src_dir));
  const bool tied = cfg.get_bool("tie_word_embeddings", false);
  std::vector<int64_t> in_cols(static_cast<size_t>(d));
  for (int i = 0; i < d; ++i) in_cols[size_t(i)] = i;

  Plan p;
  const DType dt = s.dtype;
  p.add("model.embed_tokens.weight", {V, D}, dt, [=] { return widen_out(read(*ck, "model.embed_tokens.weight", V, d), V, D); });
  LayerWidening lw{ck, "", "", HeadMap{sm.heads, wd}, d, sm.I, D, s.intermediate, in_cols, d, D};
  for (int li = 0; li < s.layers; ++li) {
    const auto it = std::find(live.begin(), live.end(), li);
    lw.to = "model.layers." + std::to_string(li) + ".";
    lw.from = it == live.end() ? "" : "model.layers." + std::to_string(it - live.begin()) + ".";
    plan_layer(p, lw, s);
    for (LayerTensor n : {LayerTensor::AttnNorm, LayerTensor::MlpNorm})  // a new layer's: the live layers' scale
      p.add(lw.to + hf(n), {D}, dt, [=, from = lw.from] {
        return from.empty() ? Mat{1, D, std::vector<float>(size_t(D), std::sqrt(float(d) / float(D)))}
                            : widen_norm(read(*ck, from + hf(n), 1, d), d, D);
      });
  }
  p.add("model.norm.weight", {D}, dt, [=] { return widen_norm(read(*ck, "model.norm.weight", 1, d), d, D); });
  const std::string head = tied ? "model.embed_tokens.weight" : "lm_head.weight";
  p.add("lm_head.weight", {V, D}, dt, [=] { return widen_in(read(*ck, head, V, d), V, D, s, "lm_head"); });

  fs::create_directories(out_dir);
  json c = cfg.raw();
  c["hidden_size"] = D;
  c["intermediate_size"] = s.intermediate;
  c["num_hidden_layers"] = s.layers;
  c["num_attention_heads"] = wd.heads;
  c["num_key_value_heads"] = wd.kv_heads;
  c["head_dim"] = wd.head_dim;
  c["rms_norm_eps"] = cfg.get_double("rms_norm_eps", 1e-6) * d / double(D);
  c["tie_word_embeddings"] = false;  // the wide head carries filler columns the embedding must not
  c["torch_dtype"] = torch_dtype(dt);
  c["widened_from"] = {{"hidden_size", d}, {"num_hidden_layers", L}, {"live_layers", live}};
  write_json(out_dir + "/config.json", c);
  copy_side_files(src_dir, out_dir);
  p.write(out_dir + "/model.safetensors");
}

namespace {
// Where widen_llama put each original layer (config.json's widened_from.live_layers).
std::vector<int> live_layers(const JsonConfig& wide_target) {
  std::vector<int> live;
  for (int64_t x : wide_target.sub("widened_from").get_int_list("live_layers")) live.push_back(int(x));
  return live;
}

// fc [d, taps * d] -> [D, taps * D]: each tap's columns where the wide tap keeps its live dims
// (filler on the dead ones, which read zeros); rows beyond d zero, since they feed the residual
// stream (EAGLE-3) or hidden_norm (DFlash), which must see zeros there.
void plan_fc(Plan& p, const std::shared_ptr<Checkpoint>& ck, const std::string& name, int taps, int d, int64_t D,
             const WidenShape& s) {
  p.add(name, {D, taps * D}, s.dtype, [=] {
    const Mat fc = read(*ck, name, d, taps * int64_t(d));
    Mat w = filler(D, taps * D, s, "fc");
    std::fill(w.v.begin() + d * taps * D, w.v.end(), 0.0f);
    for (int64_t r = 0; r < d; ++r)
      for (int c = 0; c < taps; ++c) std::copy_n(&fc.v[size_t(r * taps * d + c * d)], d, &w.at(r, c * D));
    return w;
  });
}

// A draft's tensors besides its layer matrices: fc (its rows beyond d zero: they feed the
// residual), the norms, its own embedding and head if it has them, and the vocabulary maps as they are.
void plan_draft_tensors(Plan& p, const std::shared_ptr<Checkpoint>& ck, const std::string& pre, int d, int64_t D,
                        const WidenShape& s, const std::string& draft_dir) {
  using eagle3::Tensor;
  const std::string fc_name = eagle3::spec(Tensor::Fc).hf, embed = eagle3::spec(Tensor::Embed).hf,
                    head = eagle3::spec(Tensor::LmHead).hf;
  const DType dt = s.dtype;
  plan_fc(p, ck, fc_name, 3, d, D, s);
  for (const std::string& n : ck->names()) {
    const TensorInfo& t = ck->get(n);
    if (n.find("norm") != std::string::npos && n.ends_with(".weight")) {  // hidden_norm, fc_norm.0, input_norm...
      if (t.shape.size() != 1 || t.shape[0] % d) fail("{}: {} has shape {}, not a multiple of hidden_size {}", draft_dir, n, t.shape_str(), d);
      const int64_t len = t.shape[0];
      p.add(n, {len / d * D}, dt, [=] { return widen_norm(read(*ck, n, 1, len), d, D); });
    } else if (n == embed || n == head) {
      if (t.shape.size() != 2 || t.shape[1] != d) fail("{}: {} has shape {}, expected [*, {}]", draft_dir, n, t.shape_str(), d);
      const int64_t rows = t.shape[0];
      // The embedding feeds the residual (zero beyond d); the head reads it (filler is cancelled).
      p.add(n, {rows, D}, dt, [=] {
        const Mat m = read(*ck, n, rows, d);
        return n == head ? widen_in(m, rows, D, s, n) : widen_out(m, rows, D);
      });
    } else if (n == eagle3::spec(Tensor::D2t).hf || n == eagle3::spec(Tensor::T2d).hf) {
      p.add_raw(t);
    } else if (n != fc_name && !n.starts_with(pre + "self_attn.") && !n.starts_with(pre + "mlp.")) {
      fail("{}: tensor {} is not one widening knows", draft_dir, n);
    }
  }

}

// The wide draft's config.json: the wide target's widths, and the taps moved to where the
// original layers live in the wide target.
json wide_draft_config(const JsonConfig& dc, const JsonConfig& tc, const Heads& wd, int II, int d, int64_t D, DType dt) {
  const JsonConfig wf = tc.sub("widened_from");
  // Aux-layer ids: original layer i lives at live[i]; id L (the last layer's output) at the wide L.
  std::vector<int> live = live_layers(tc);
  live.push_back(tc.get_size("num_hidden_layers"));
  // The taps as the loader resolves them (entering layer j, whichever numbering the config used):
  // entering original layer j is entering wide layer live[j]; written back in both places the way
  // the trainer's export writes them.
  std::vector<int> new_ids;
  for (int j : parse_eagle3_config(dc, wf.get_size("num_hidden_layers")).aux_layers)
    new_ids.push_back(live[size_t(j)]);
  json c = dc.raw();
  c["hidden_size"] = D;
  c["target_hidden_size"] = D;
  c["num_attention_heads"] = wd.heads;
  c["num_key_value_heads"] = wd.kv_heads;
  c["head_dim"] = wd.head_dim;
  c["intermediate_size"] = II;
  c["rms_norm_eps"] = dc.get_double("rms_norm_eps", 1e-6) * d / double(D);
  c["eagle_aux_hidden_state_layer_ids"] = new_ids;
  c["eagle_config"] = eagle_config_for_export(new_ids);
  c["torch_dtype"] = torch_dtype(dt);
  c["widened_from"] = {{"hidden_size", d}};
  return c;
}

}  // namespace

void widen_eagle3(const std::string& draft_dir, const std::string& wide_target_dir, const std::string& out_dir,
                  const WidenShape& s) {
  const std::string dpath = draft_dir + "/config.json", tpath = wide_target_dir + "/config.json";
  const JsonConfig dc = JsonConfig::load(dpath), tc = JsonConfig::load(tpath);
  if (dc.has("transformer_layer_config"))
    fail("{}: transformer_layer_config: speculators-format drafts are not widened; export the draft as "
         "LlamaForCausalLMEagle3", dpath);
  if (dc.get_size("num_hidden_layers", 1) != 1)
    fail("{}: num_hidden_layers {}: widening takes one-layer drafts", dpath, dc.get_size("num_hidden_layers", 1));
  if (!tc.has("widened_from")) fail("{}: no widened_from: widen the target with `eaglet widen` first", tpath);
  const JsonConfig wf = tc.sub("widened_from");
  const int d = dc.get_size("hidden_size");
  if (d != wf.get_size("hidden_size"))
    fail("{}: hidden_size {} is not the original target's {} ({})", dpath, d, wf.get_size("hidden_size"), tpath);
  if (dc.get_size("target_hidden_size", d) != d)
    fail("{}: target_hidden_size != hidden_size is not supported by widening", dpath);
  const int64_t D = tc.get_size("hidden_size");
  const Heads sm{dc.get_size("num_attention_heads"), dc.get_size("num_key_value_heads", dc.get_size("num_attention_heads")),
                 dc.get_size("head_dim", d / dc.get_size("num_attention_heads"))};
  const Heads wd{tc.get_size("num_attention_heads"), tc.get_size("num_key_value_heads"),
                 tc.get_size("head_dim", int(D) / tc.get_size("num_attention_heads"))};
  check_heads(sm, wd, dpath);
  const int I = dc.get_size("intermediate_size"), II = std::max(I, tc.get_size("intermediate_size"));
  const HeadMap hm{sm, wd};

  auto ck = std::make_shared<Checkpoint>(Checkpoint::open_dir(draft_dir));
  const std::string pre = eagle3::first_layer_prefix([&](const std::string& n) { return ck->has(n); });
  if (pre.empty()) fail("{}: no layer 0 ('{}*' or '{}*' tensors)", draft_dir, eagle3::kMidlayer, eagle3::kLayer0);
  Plan p;
  plan_draft_tensors(p, ck, pre, d, D, s, draft_dir);
  std::vector<int64_t> in_cols;  // the attention input is [embedding, hidden]
  for (int i = 0; i < d; ++i) in_cols.push_back(i);
  for (int i = 0; i < d; ++i) in_cols.push_back(D + i);
  plan_layer(p, LayerWidening{ck, pre, pre, hm, d, I, D, II, in_cols, 2 * d, 2 * D}, s);
  fs::create_directories(out_dir);
  write_json(out_dir + "/config.json", wide_draft_config(dc, tc, wd, II, d, D, s.dtype));
  p.write(out_dir + "/model.safetensors");
}

namespace {
// The wide DFlash draft's config.json: the wide target's widths; target_layer_ids (outputs of
// layers) moved to the wide layers that carry those outputs.
json wide_dflash_config(const JsonConfig& dc, const DFlashConfig& c, const JsonConfig& tc, const Heads& wd, int II, int d,
                        int64_t D, DType dt) {
  const std::vector<int> live = live_layers(tc);
  std::vector<int> ids;
  for (int id : c.target_layer_ids) ids.push_back(live[size_t(id)]);
  json out = dc.raw();
  out["hidden_size"] = D;
  if (out.contains("target_hidden_size")) out["target_hidden_size"] = D;
  out["num_attention_heads"] = wd.heads;
  out["num_key_value_heads"] = wd.kv_heads;
  out["head_dim"] = wd.head_dim;
  out["intermediate_size"] = II;
  out["rms_norm_eps"] = dc.get_double("rms_norm_eps", 1e-6) * d / double(D);
  out["num_target_layers"] = tc.get_size("num_hidden_layers");
  out["dflash_config"]["target_layer_ids"] = ids;
  out["torch_dtype"] = torch_dtype(dt);
  out["widened_from"] = {{"hidden_size", d}};
  return out;
}
}  // namespace

void widen_dflash(const std::string& draft_dir, const std::string& wide_target_dir, const std::string& out_dir,
                  const WidenShape& s) {
  const std::string dpath = draft_dir + "/config.json", tpath = wide_target_dir + "/config.json";
  const JsonConfig dc = JsonConfig::load(dpath), tc = JsonConfig::load(tpath);
  if (!tc.has("widened_from")) fail("{}: no widened_from: widen the target with `eaglet widen` first", tpath);
  const JsonConfig wf = tc.sub("widened_from");
  const int d = wf.get_size("hidden_size");
  const DFlashConfig c = parse_dflash_config(dc, wf.get_size("num_hidden_layers"), d);
  if (c.attention_bias) fail("{}: attention_bias is true; widening supports bias-free layers", dpath);
  const int64_t D = tc.get_size("hidden_size");
  const Heads sm{c.num_heads, c.num_kv_heads, c.head_dim};
  const Heads wd{tc.get_size("num_attention_heads"), tc.get_size("num_key_value_heads"),
                 tc.get_size("head_dim", int(D) / tc.get_size("num_attention_heads"))};
  check_heads(sm, wd, dpath);
  const int II = std::max(c.intermediate, tc.get_size("intermediate_size"));

  auto ck = std::make_shared<Checkpoint>(Checkpoint::open_dir(draft_dir));
  Plan p;
  plan_fc(p, ck, "fc.weight", int(c.target_layer_ids.size()), d, D, s);
  for (const char* n : {"hidden_norm.weight", "norm.weight"})
    p.add(n, {D}, s.dtype, [=] { return widen_norm(read(*ck, n, 1, d), d, D); });
  std::vector<int64_t> in_cols;
  for (int i = 0; i < d; ++i) in_cols.push_back(i);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string pre = "layers." + std::to_string(i) + ".";
    plan_layer(p, LayerWidening{ck, pre, pre, HeadMap{sm, wd}, d, c.intermediate, D, II, in_cols, d, D, true}, s);
    for (LayerTensor n : {LayerTensor::AttnNorm, LayerTensor::MlpNorm})
      p.add(pre + hf(n), {D}, s.dtype, [=] { return widen_norm(read(*ck, pre + hf(n), 1, d), d, D); });
  }
  for (const std::string& n : ck->names())
    if (std::none_of(p.headers.begin(), p.headers.end(), [&](const TensorHeader& h) { return h.name == n; }))
      fail("{}: tensor {} is not one widening knows", draft_dir, n);
  fs::create_directories(out_dir);
  write_json(out_dir + "/config.json", wide_dflash_config(dc, c, tc, wd, II, d, D, s.dtype));
  p.write(out_dir + "/model.safetensors");
}

void widen_draft(const std::string& draft_dir, const std::string& wide_target_dir, const std::string& out_dir,
                 const WidenShape& s) {
  const JsonConfig dc = JsonConfig::load(draft_dir + "/config.json");
  const bool dflash = dc.has("architectures") && dc.raw()["architectures"].dump().find("DFlash") != std::string::npos;
  if (dflash) widen_dflash(draft_dir, wide_target_dir, out_dir, s);
  else widen_eagle3(draft_dir, wide_target_dir, out_dir, s);
}

}  // namespace eaglet
