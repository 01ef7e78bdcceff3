// Storage dtypes and the scalar conversions every kernel's reference path uses.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace eaglet {

enum class DType { F32, BF16, F16, I64, I32, U8, BOOL, F8_E4M3 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
// Parses a safetensors dtype string ("F32", "BF16", ...); returns false when unknown.
bool parse_dtype(const std::string& s, DType* out);

using bf16_t = uint16_t;
using f16_t = uint16_t;

inline float bf16_to_f32(bf16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round-to-nearest-even, NaN kept quiet: the same rounding the AVX-512 BF16 instructions use.
inline bf16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bf16_t(bits >> 16);
}

float f16_to_f32(f16_t h);
f16_t f32_to_f16(float f);  // round to nearest even; overflow to infinity, NaN kept

}  // namespace eaglet
