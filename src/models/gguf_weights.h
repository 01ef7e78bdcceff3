// Weight views from a GGUF file's tensors, for the GGUF model and draft loaders: F32 and BF16
// used in place from the mapping, Q8_0, Q4_0, Q4_K and Q6_K copied once into the kernels' layout
// of rows interleaved by 8 (kernels/ggml_interleave.h), F16 (and block tables that lookups read
// as floats) decoded to F32. Shapes and types are checked against what the caller expects, and
// errors name the file and the tensor.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "kernels/ops.h"
#include "models/weights.h"

namespace eaglet {

// The Llama-layer fields of a config.json from `<arch>.*` GGUF metadata: hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
// rms_norm_eps, rope_theta, rotary_dim, max_position_embeddings and linear rope_scaling. Missing
// or malformed keys and per-frequency RoPE factors fail naming the file and the key.
nlohmann::json gguf_llama_config(const GgufFile& f, const std::string& arch);

class GgufWeights {
 public:
  // Views live in (and the file is kept alive by) `store`.
  GgufWeights(std::shared_ptr<const GgufFile> f, WeightStore* store);

  // A [rows, cols] matrix (GGUF dims {cols, rows}). `heads` > 0 undoes llama.cpp's q/k
  // permutation for interleaved RoPE (within each head, HF row half * hd/2 + i is GGUF row
  // 2i + half); `floats` decodes block types to F32 (embedding tables).
  kernels::WeightView matrix(const std::string& name, int64_t rows, int64_t cols, int heads = 0, bool floats = false);
  std::vector<float> vector(const std::string& name, int64_t n);
  // An integer vector (I32 or I64), e.g. an EAGLE-3 draft's d2t.
  std::vector<int64_t> ints(const std::string& name, int64_t n);
  bool has(const std::string& name) const { return f_->find(name) != nullptr; }
  const GgufFile& file() const { return *f_; }

 private:
  const GgufTensor& shaped(const std::string& name, const std::vector<int64_t>& dims) const;
  // v's rows in Hugging Face order (llama.cpp's q/k permutation undone), as new bytes.
  static AlignedBytes unpermute(const kernels::WeightView& v, int heads);
  // A tensor read into a copy (interleaved blocks, decoded floats) gives its pages of the file
  // back at once, as WeightStore does for safetensors; reading it again is an internal error.
  void copied(const GgufTensor& t);

  std::shared_ptr<const GgufFile> f_;
  WeightStore* store_;
  ReleasedTensors released_;
};

}  // namespace eaglet
