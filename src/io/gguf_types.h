// GGUF's tensor type ids as ggml defines them (ggml.h), with each type's block size in weights
// and bytes: what reading a GGUF file's tensor directory needs. Decoding the blocks is the
// kernels' business (kernels/ggml_quant.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace eaglet {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  Q4_K = 12,
  Q6_K = 14,
  BF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;
  int64_t block_weights;  // weights per block (1 for plain floats)
  size_t block_bytes;
  bool supported;  // whether eaglet decodes it (the others are named in errors)
};
// Any GGUF type id (including the ones eaglet does not decode); nullptr for ids ggml lacks.
const GgmlTypeInfo* ggml_type_info(uint32_t type);
// Bytes of one row of `cols` weights of a supported type in GGUF layout.
inline size_t ggml_row_bytes(GgmlType type, int64_t cols) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  return size_t(cols / info->block_weights) * info->block_bytes;
}

}  // namespace eaglet
