#include "support/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "io/json_config.h"
#include "io/safetensors.h"
#include "kernels/ops.h"

namespace eaglet::test {

namespace {

class Out {
 public:
  template <typename T>
  void put(T v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    buf_ += s;
  }
  // One value of `type`; returns the type id written for `v` when type is 0 (inferred).
  static uint32_t type_of(const nlohmann::json& v) {
    if (v.is_string()) return 8;
    if (v.is_boolean()) return 7;
    if (v.is_number_float()) return 6;
    if (v.is_number_integer()) return v.get<int64_t>() < 0 ? 5 : 4;
    if (v.is_array()) return 9;
    fail("gguf writer: cannot write {}", v.dump());
  }
  void value(const nlohmann::json& v) {
    switch (type_of(v)) {
      case 8: return str(v.get<std::string>());
      case 7: return put<uint8_t>(v.get<bool>());
      case 6: return put<float>(v.get<float>());
      case 5: return put<int32_t>(v.get<int32_t>());
      case 4: return put<uint32_t>(v.get<uint32_t>());
      default:
        put<uint32_t>(v.empty() ? 4 : type_of(v[0]));
        put<uint64_t>(v.size());
        for (auto& e : v) value(e);
    }
  }
  std::string& buf() { return buf_; }

 private:
  std::string buf_;
};

std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::string encode(const std::vector<float>& rows, int64_t cols, kernels::GgmlType type) {
  using kernels::GgmlType;
  const int64_t n = int64_t(rows.size());
  if (type == GgmlType::F32) return float_bytes(rows);
  if (type == GgmlType::Q8_0) {
    std::vector<kernels::BlockQ8_0> b(size_t(n / 32));
    for (int64_t r = 0; r < n / cols; ++r) kernels::quantize_row_q8_0(&rows[size_t(r * cols)], &b[size_t(r * cols / 32)], cols);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(b[0]));
  }
  if (type == GgmlType::Q4_0) {
    std::vector<kernels::BlockQ4_0> b(size_t(n / 32));
    for (int64_t r = 0; r < n / cols; ++r) kernels::quantize_row_q4_0(&rows[size_t(r * cols)], &b[size_t(r * cols / 32)], cols);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(b[0]));
  }
  fail("gguf writer: cannot encode type {}", uint32_t(type));
}

}  // namespace

void write_gguf(const std::string& path, const nlohmann::json& metadata, const std::vector<GgufTensorToWrite>& tensors,
                uint32_t alignment) {
  Out o;
  o.put<uint32_t>(0x46554747u);
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors.size());
  o.put<uint64_t>(metadata.size() + (alignment != 32));
  for (auto& [k, v] : metadata.items()) {
    o.str(k);
    o.put<uint32_t>(Out::type_of(v));
    o.value(v);
  }
  if (alignment != 32) {
    o.str("general.alignment");
    o.put<uint32_t>(4);
    o.put<uint32_t>(alignment);
  }
  uint64_t offset = 0;
  for (auto& t : tensors) {
    o.str(t.name);
    o.put<uint32_t>(uint32_t(t.dims.size()));
    for (int64_t d : t.dims) o.put<uint64_t>(uint64_t(d));
    o.put<uint32_t>(uint32_t(t.type));
    o.put<uint64_t>(offset);
    offset += (t.bytes.size() + alignment - 1) / alignment * alignment;
  }
  std::string& b = o.buf();
  b.resize((b.size() + alignment - 1) / alignment * alignment, '\0');
  for (auto& t : tensors) {
    b += t.bytes;
    b.resize((b.size() + alignment - 1) / alignment * alignment, '\0');
  }
  std::ofstream(path, std::ios::binary) << b;
}

void write_gguf_from_hf(const std::string& hf_dir, const std::string& path, kernels::GgmlType layer_type) {
  const JsonConfig cfg = JsonConfig::load(hf_dir + "/config.json");
  const std::string hf_arch = cfg.raw()["architectures"][0].get<std::string>();
  const std::string arch = hf_arch == "Qwen2ForCausalLM" ? "qwen2" : hf_arch == "Qwen3ForCausalLM" ? "qwen3" : "llama";
  const int64_t H = cfg.get_int("hidden_size"), heads = cfg.get_int("num_attention_heads");
  const int64_t kv_heads = cfg.get_int("num_key_value_heads", heads), hd = cfg.get_int("head_dim", H / heads);
  const int64_t L = cfg.get_int("num_hidden_layers");
  nlohmann::json meta = {{"general.architecture", arch},
                         {arch + ".block_count", L},
                         {arch + ".embedding_length", H},
                         {arch + ".feed_forward_length", cfg.get_int("intermediate_size")},
                         {arch + ".attention.head_count", heads},
                         {arch + ".attention.head_count_kv", kv_heads},
                         {arch + ".attention.key_length", hd},
                         {arch + ".attention.layer_norm_rms_epsilon", float(cfg.get_double("rms_norm_eps", 1e-6))},
                         {arch + ".rope.freq_base", float(cfg.get_double("rope_theta", 10000.0))},
                         {arch + ".context_length", cfg.get_int("max_position_embeddings", 4096)}};
  const Checkpoint ck = Checkpoint::open_dir(hf_dir);
  std::vector<GgufTensorToWrite> out;
  auto floats = [&](const std::string& name) {
    const TensorInfo& t = ck.get(name);
    std::vector<float> v(size_t(t.numel()));
    kernels::to_f32(t.dtype, t.data, v.data(), t.numel());
    return std::make_pair(v, t.shape);
  };
  // convert_hf_to_gguf.py's LlamaModel.permute: within each head, rows [2, hd/2] -> [hd/2, 2].
  auto permute = [&](std::vector<float> w, int64_t n_head, int64_t cols) {
    std::vector<float> p(w.size());
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t i = 0; i < hd / 2; ++i)
          std::memcpy(&p[size_t((h * hd + 2 * i + half) * cols)], &w[size_t((h * hd + half * (hd / 2) + i) * cols)],
                      size_t(cols) * sizeof(float));
    return p;
  };
  auto add = [&](const std::string& from, const std::string& to, kernels::GgmlType type, int64_t permute_heads = 0) {
    auto [v, shape] = floats(from);
    std::vector<int64_t> dims(shape.rbegin(), shape.rend());
    if (permute_heads) v = permute(std::move(v), permute_heads, shape[1]);
    out.push_back({to, type, dims, encode(v, dims[0], type)});
  };
  add("model.embed_tokens.weight", "token_embd.weight", kernels::GgmlType::F32);
  if (ck.has("lm_head.weight")) add("lm_head.weight", "output.weight", kernels::GgmlType::F32);
  add("model.norm.weight", "output_norm.weight", kernels::GgmlType::F32);
  const bool llama = arch == "llama";
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    add(p + "self_attn.q_proj.weight", g + "attn_q.weight", layer_type, llama ? heads : 0);
    add(p + "self_attn.k_proj.weight", g + "attn_k.weight", layer_type, llama ? kv_heads : 0);
    add(p + "self_attn.v_proj.weight", g + "attn_v.weight", layer_type);
    add(p + "self_attn.o_proj.weight", g + "attn_output.weight", layer_type);
    add(p + "mlp.gate_proj.weight", g + "ffn_gate.weight", layer_type);
    add(p + "mlp.up_proj.weight", g + "ffn_up.weight", layer_type);
    add(p + "mlp.down_proj.weight", g + "ffn_down.weight", layer_type);
    add(p + "input_layernorm.weight", g + "attn_norm.weight", kernels::GgmlType::F32);
    add(p + "post_attention_layernorm.weight", g + "ffn_norm.weight", kernels::GgmlType::F32);
    for (const char* b : {"q", "k", "v"})
      if (ck.has(p + "self_attn." + b + "_proj.bias"))
        add(p + "self_attn." + b + "_proj.bias", g + "attn_" + b + ".bias", kernels::GgmlType::F32);
    for (const char* n : {"q", "k"})
      if (ck.has(p + "self_attn." + n + "_norm.weight"))
        add(p + "self_attn." + n + "_norm.weight", g + "attn_" + n + "_norm.weight", kernels::GgmlType::F32);
  }
  write_gguf(path, meta, out);
}

}  // namespace eaglet::test
