// GGUF files for tests, written from the format's definition: metadata of the usual value types,
// tensors of any ggml type, and a Hugging Face checkpoint converted the way llama.cpp's
// convert_hf_to_gguf.py lays it out (tensor names, innermost-first shapes, llama's q/k row
// permutation for its interleaved RoPE).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kernels/ggml_quant.h"

namespace eaglet::test {

struct GgufTensorToWrite {
  std::string name;
  kernels::GgmlType type;
  std::vector<int64_t> dims;  // innermost first
  std::string bytes;
};

// Integers are written as UINT32 (INT32 when negative), numbers as FLOAT32, arrays by their
// first element's type.
void write_gguf(const std::string& path, const nlohmann::json& metadata, const std::vector<GgufTensorToWrite>& tensors,
                uint32_t alignment = 32);

// `hf_dir` (a Llama / Qwen2 / Qwen3 safetensors checkpoint) as GGUF: the layers' projection
// matrices in `layer_type` (F32, Q8_0 or Q4_0, quantised from F32 by kernels/ggml_quant.h),
// everything else F32. No tokenizer metadata.
void write_gguf_from_hf(const std::string& hf_dir, const std::string& path, kernels::GgmlType layer_type);

}  // namespace eaglet::test
