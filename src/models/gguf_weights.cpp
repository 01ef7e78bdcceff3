#include "models/gguf_weights.h"

#include <cstring>

#include "core/error.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"

namespace eaglet {

namespace {

std::vector<float> decoded(const GgufTensor& t) {
  std::vector<float> out(size_t(t.rows() * t.cols()));
  kernels::dequantize_row(kernels::GgmlType(t.type), t.data, out.data(), t.rows() * t.cols());
  return out;
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s;
  for (int64_t x : d) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

}  // namespace

nlohmann::json gguf_llama_config(const GgufFile& f, const std::string& arch) {
  const nlohmann::json& m = f.metadata();
  const std::string p = arch + ".";
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
  nlohmann::json hf = {{"hidden_size", need("embedding_length")},
                       {"intermediate_size", need("feed_forward_length")},
                       {"num_hidden_layers", need("block_count")},
                       {"num_attention_heads", need("attention.head_count")},
                       {"rms_norm_eps", need("attention.layer_norm_rms_epsilon")}};
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
  if (f.find("rope_freqs.weight") || f.find("blk.0.rope_freqs.weight"))
    fail("{}: per-frequency RoPE factors (rope_freqs.weight, Llama 3.1 style) are not supported yet", f.path());
  return hf;
}

GgufWeights::GgufWeights(std::shared_ptr<const GgufFile> f, WeightStore* store) : f_(std::move(f)), store_(store) {
  store_->hold(f_);
}

kernels::WeightView GgufWeights::matrix(const std::string& name, int64_t rows, int64_t cols, int heads, bool floats) {
  const GgufTensor& t = shaped(name, {cols, rows});
  using kernels::GgmlType;
  kernels::WeightView v;
  const kernels::QuantScheme blocks = kernels::interleaved_scheme(GgmlType(t.type));
  if (GgmlType(t.type) == GgmlType::F32) v = {DType::F32, t.data, rows, cols};
  else if (GgmlType(t.type) == GgmlType::BF16) v = {DType::BF16, t.data, rows, cols};
  else if (blocks != kernels::QuantScheme::None && !floats) v = {DType::U8, t.data, rows, cols, blocks};
  else v = store_->own(decoded(t), rows, cols);  // F16, and block tables read as floats (embeddings)
  AlignedBytes hf_rows;  // unpermuted q/k rows: kept only if packing reads them in place
  if (heads > 0) {
    hf_rows = unpermute(v, heads);
    v.data = hf_rows.data();
  }
  v = store_->packed(v);
  if (!hf_rows.empty() && v.data == hf_rows.data()) v.data = store_->own_bytes(std::move(hf_rows));  // same buffer
  if (v.data != t.data) copied(t);
  return v;
}

std::vector<float> GgufWeights::vector(const std::string& name, int64_t n) {
  const GgufTensor& t = shaped(name, {n});
  std::vector<float> out = decoded(t);
  copied(t);
  return out;
}

void GgufWeights::copied(const GgufTensor& t) {
  store_->count_released(released_.release(t.name, t.data, t.nbytes));
}

std::vector<int64_t> GgufWeights::ints(const std::string& name, int64_t n) {
  const GgufTensor& t = f_->get(name);
  if (t.dims != std::vector<int64_t>{n})
    fail("{}: tensor '{}' has GGUF shape {}, expected [{}]", f_->path(), name, dims_str(t.dims), n);
  constexpr uint32_t kI32 = 26, kI64 = 27;  // ggml type ids
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (t.type == kI64) {
    std::memcpy(out.data(), t.data, out.size() * sizeof(int64_t));
  } else if (t.type == kI32) {
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, t.data + 4 * i, 4);
      out[size_t(i)] = v;
    }
  } else {
    fail("{}: tensor '{}' is {}, expected I32 or I64", f_->path(), name, kernels::ggml_type_info(t.type)->name);
  }
  return out;
}

const GgufTensor& GgufWeights::shaped(const std::string& name, const std::vector<int64_t>& dims) const {
  const GgufTensor& t = f_->get(name);
  released_.check(f_->path(), name);
  if (t.dims != dims)
    fail("{}: tensor '{}' has GGUF shape {}, expected {}", f_->path(), name, dims_str(t.dims), dims_str(dims));
  const kernels::GgmlTypeInfo* info = kernels::ggml_type_info(t.type);
  if (!info->supported)
    fail("{}: tensor '{}' is {}; eaglet reads F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K", f_->path(), name, info->name);
  return t;
}

// On the file's row layout (before packing).
AlignedBytes GgufWeights::unpermute(const kernels::WeightView& v, int heads) {
  const size_t row_bytes = v.dtype == DType::U8 ? kernels::ggml_row_bytes(kernels::ggml_type_of(v.quant), v.cols)
                                                : size_t(v.cols) * dtype_size(v.dtype);
  const int64_t hd = v.rows / heads, half = hd / 2;
  AlignedBytes out(row_bytes * size_t(v.rows));
  const auto* src = static_cast<const uint8_t*>(v.data);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < hd; ++r) {  // HF row r of head h comes from GGUF row 2 * (r % half) + r / half
      const int64_t from = h * hd + 2 * (r % half) + r / half;
      std::memcpy(out.data() + size_t(h * hd + r) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
    }
  return out;
}

}  // namespace eaglet
