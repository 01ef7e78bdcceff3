// Llama-family models from llama.cpp's GGUF files (`llama`, `qwen2`, `qwen3`). The metadata is
// turned into the Hugging Face config fields, so config checks, RoPE and the decoder are the
// safetensors path's own; tensors become weight views: F32 and BF16 used in place from the
// mapping, Q8_0, Q4_0, Q4_K and Q6_K copied once into the kernels' layout of rows interleaved by 8
// (kernels/ggml_interleave.h), F16 (and a quantised embedding table, which lookups read as
// floats) decoded to F32 at load.
//
// llama.cpp's converter permutes the q and k rows of `llama` models for its interleaved RoPE
// (within each head, HF row half * hd/2 + i becomes row 2i + half); they are put back in Hugging
// Face order here. qwen2 and qwen3 use the NeoX layout in both and are left as they are.
#include <spdlog/spdlog.h>

#include <cstring>

#include "core/error.h"
#include "io/gguf.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "models/decoder.h"

namespace eaglet {

namespace {

struct GgufArch {
  const char* gguf;
  const char* hf;
  bool qkv_bias, qk_norm, permuted_qk;
};
constexpr GgufArch kArchs[] = {
    {"llama", "LlamaForCausalLM", false, false, true},
    {"qwen2", "Qwen2ForCausalLM", true, false, false},
    {"qwen3", "Qwen3ForCausalLM", false, true, false},
};

class GgufWeights {
 public:
  GgufWeights(std::shared_ptr<const GgufFile> f, WeightStore* store) : f_(std::move(f)), store_(store) {}

  // A [rows, cols] matrix (GGUF dims {cols, rows}); `heads` > 0 undoes the llama q/k permutation.
  kernels::WeightView matrix(const std::string& name, int64_t rows, int64_t cols, int heads = 0,
                             bool floats = false) {
    const GgufTensor& t = shaped(name, {cols, rows});
    using kernels::GgmlType;
    kernels::WeightView v;
    const kernels::QuantScheme blocks = kernels::interleaved_scheme(GgmlType(t.type));
    if (GgmlType(t.type) == GgmlType::F32) v = {DType::F32, t.data, rows, cols};
    else if (GgmlType(t.type) == GgmlType::BF16) v = {DType::BF16, t.data, rows, cols};
    else if (blocks != kernels::QuantScheme::None && !floats) v = {DType::U8, t.data, rows, cols, blocks};
    else v = store_->own(decoded(t), rows, cols);  // F16, and block tables read as floats (embeddings)
    if (heads > 0) v = unpermute(v, heads);
    if (v.dtype == DType::U8)  // the kernels read block rows interleaved by 8
      v.data = store_->own_bytes(kernels::interleave_rows(GgmlType(t.type), v.data, rows, cols));
    return v;
  }

  std::vector<float> vector(const std::string& name, int64_t n) { return decoded(shaped(name, {n})); }
  bool has(const std::string& name) const { return f_->find(name) != nullptr; }

 private:
  const GgufTensor& shaped(const std::string& name, const std::vector<int64_t>& dims) {
    const GgufTensor& t = f_->get(name);
    if (t.dims != dims) {
      auto str = [](const std::vector<int64_t>& d) {
        std::string s;
        for (int64_t x : d) s += (s.empty() ? "" : ", ") + std::to_string(x);
        return "[" + s + "]";
      };
      fail("{}: tensor '{}' has GGUF shape {}, expected {}", f_->path(), name, str(t.dims), str(dims));
    }
    const kernels::GgmlTypeInfo* info = kernels::ggml_type_info(t.type);
    if (!info->supported)
      fail("{}: tensor '{}' is {}; eaglet reads F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K", f_->path(), name,
           info->name);
    return t;
  }

  static std::vector<float> decoded(const GgufTensor& t) {
    std::vector<float> out(size_t(t.rows() * t.cols()));
    kernels::dequantize_row(kernels::GgmlType(t.type), t.data, out.data(), t.rows() * t.cols());
    return out;
  }

  // On the file's row layout (before interleaving).
  kernels::WeightView unpermute(kernels::WeightView v, int heads) {
    const size_t row_bytes = v.dtype == DType::U8 ? kernels::ggml_row_bytes(kernels::ggml_type_of(v.quant), v.cols)
                                                  : size_t(v.cols) * dtype_size(v.dtype);
    const int64_t hd = v.rows / heads, half = hd / 2;
    std::vector<uint8_t> out(row_bytes * size_t(v.rows));
    const auto* src = static_cast<const uint8_t*>(v.data);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < hd; ++r) {  // HF row r of head h comes from GGUF row 2 * (r % half) + r / half
        const int64_t from = h * hd + 2 * (r % half) + r / half;
        std::memcpy(out.data() + size_t(h * hd + r) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
      }
    v.data = store_->own_bytes(std::move(out));
    return v;
  }

  std::shared_ptr<const GgufFile> f_;
  WeightStore* store_;
};

// The Hugging Face config.json fields of a GGUF model's metadata.
nlohmann::json hf_config(const GgufFile& f, const GgufArch& a) {
  const nlohmann::json& m = f.metadata();
  const std::string p = std::string(a.gguf) + ".";
  auto get = [&](const std::string& key) -> const nlohmann::json* {
    auto it = m.find(p + key);
    if (it == m.end()) return nullptr;
    if (!it->is_number())
      fail("{}: metadata '{}{}' must be a number (per-layer values are not supported), not {}", f.path(), p, key,
           it->dump().substr(0, 60));
    return &*it;
  };
  auto need = [&](const std::string& key) {
    if (const nlohmann::json* v = get(key)) return *v;
    fail("{}: metadata '{}{}' is missing", f.path(), p, key);
  };
  nlohmann::json hf = {{"architectures", {a.hf}},
                       {"hidden_size", need("embedding_length")},
                       {"intermediate_size", need("feed_forward_length")},
                       {"num_hidden_layers", need("block_count")},
                       {"num_attention_heads", need("attention.head_count")},
                       {"rms_norm_eps", need("attention.layer_norm_rms_epsilon")},
                       {"vocab_size", f.get("token_embd.weight").dims.size() == 2 ? f.get("token_embd.weight").dims[1] : 0},
                       {"tie_word_embeddings", !f.find("output.weight")}};
  if (auto v = get("attention.head_count_kv")) hf["num_key_value_heads"] = *v;
  if (auto v = get("attention.key_length")) hf["head_dim"] = *v;
  if (auto v = get("rope.freq_base")) hf["rope_theta"] = *v;
  if (auto v = get("rope.dimension_count")) hf["rotary_dim"] = *v;
  if (auto v = get("context_length")) hf["max_position_embeddings"] = *v;
  if (m.contains(p + "rope.scaling.type") && m[p + "rope.scaling.type"] != "none") {
    if (m[p + "rope.scaling.type"] != "linear")
      fail("{}: rope scaling '{}' is not supported (none, linear)", f.path(), m[p + "rope.scaling.type"].dump());
    hf["rope_scaling"] = {{"type", "linear"}, {"factor", need("rope.scaling.factor")}};
  }
  if (f.find("rope_freqs.weight"))
    fail("{}: per-frequency RoPE factors (rope_freqs.weight, Llama 3.1 style) are not supported yet", f.path());
  for (const char* k : {"bos_token_id", "eos_token_id"})
    if (m.contains(std::string("tokenizer.ggml.") + k)) hf[k] = m[std::string("tokenizer.ggml.") + k];
  return hf;
}

}  // namespace

std::unique_ptr<Model> load_gguf_model(const std::string& path) {
  auto file = std::make_shared<const GgufFile>(path);
  const std::string arch = file->metadata().value("general.architecture", "");
  const GgufArch* a = nullptr;
  for (const GgufArch& x : kArchs)
    if (arch == x.gguf) a = &x;
  if (!a) fail("{}: GGUF architecture '{}' is not supported (llama, qwen2, qwen3)", path, arch);
  const JsonConfig cfg(hf_config(*file, *a), path + " (GGUF metadata)");
  ModelConfig mc = DecoderModel::parse_config(cfg, path);
  mc.architecture = a->hf;
  const DecoderOptions opts{a->qkv_bias, a->qk_norm, !file->find("output.weight")};

  WeightStore store;
  store.hold(file);
  GgufWeights w(file, &store);
  const int64_t H = mc.hidden, I = mc.intermediate, hd = mc.head_dim;
  const int64_t qd = mc.num_heads * hd, kvd = mc.num_kv_heads * hd;
  const kernels::WeightView embed = w.matrix("token_embd.weight", mc.vocab, H, 0, /*floats=*/true);
  const kernels::WeightView lm_head = opts.tie_embeddings ? embed : w.matrix("output.weight", mc.vocab, H);
  std::vector<DecoderLayerWeights> layers(size_t(mc.num_layers));
  for (int l = 0; l < mc.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    DecoderLayerWeights& L = layers[size_t(l)];
    L.q = w.matrix(p + "attn_q.weight", qd, H, a->permuted_qk ? mc.num_heads : 0);
    L.k = w.matrix(p + "attn_k.weight", kvd, H, a->permuted_qk ? mc.num_kv_heads : 0);
    L.v = w.matrix(p + "attn_v.weight", kvd, H);
    L.o = w.matrix(p + "attn_output.weight", H, qd);
    L.gate = w.matrix(p + "ffn_gate.weight", I, H);
    L.up = w.matrix(p + "ffn_up.weight", I, H);
    L.down = w.matrix(p + "ffn_down.weight", H, I);
    L.attn_norm = w.vector(p + "attn_norm.weight", H);
    L.mlp_norm = w.vector(p + "ffn_norm.weight", H);
    if (a->qkv_bias) {
      L.q_bias = w.vector(p + "attn_q.bias", qd);
      L.k_bias = w.vector(p + "attn_k.bias", kvd);
      L.v_bias = w.vector(p + "attn_v.bias", kvd);
    }
    if (a->qk_norm) {
      L.q_norm = w.vector(p + "attn_q_norm.weight", hd);
      L.k_norm = w.vector(p + "attn_k_norm.weight", hd);
    }
  }
  mc.dtype_name = kernels::ggml_type_info(file->get("blk.0.ffn_down.weight").type)->name;
  const std::vector<float> final_norm = w.vector("output_norm.weight", H);
  return std::make_unique<DecoderModel>(mc, opts, Rope::from_config(cfg, int(hd)), std::move(store), embed, lm_head,
                                        final_norm, std::move(layers));
}

}  // namespace eaglet
