#include "kernels/quant.h"

#include <cmath>
#include <limits>

namespace eaglet::kernels {

float e4m3_to_f32(uint8_t code) {
  const int sign = code >> 7, exp = (code >> 3) & 0xf, mant = code & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = exp == 0 ? std::ldexp(float(mant), -9)  // subnormal: mant/8 * 2^-6
                             : std::ldexp(1.0f + float(mant) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

float e8m0_to_f32(uint8_t code) {
  if (code == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(code) - 127);
}

float Fp8Scales::scale(int64_t n, int64_t k) const {
  if (scheme == QuantScheme::Mxfp8)
    return e8m0_to_f32(static_cast<const uint8_t*>(data)[n * (K / kMxGroup) + k / kMxGroup]);
  return static_cast<const float*>(data)[(n / kFp8Block) * block_cols() + k / kFp8Block];
}

bool Fp8Scales::any_huge(int64_t n0, int64_t n1) const {
  if (scheme == QuantScheme::Mxfp8) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    for (int64_t i = n0 * (K / kMxGroup); i < n1 * (K / kMxGroup); ++i)
      if (p[i] >= 247 && p[i] != 0xff) return true;
    return false;
  }
  const float* p = static_cast<const float*>(data);
  const int64_t bc = block_cols();
  for (int64_t i = (n0 / kFp8Block) * bc; i < ((n1 + kFp8Block - 1) / kFp8Block) * bc; ++i)
    if (std::isinf(p[i] * 256.0f) && !std::isinf(p[i])) return true;
  return false;
}

}  // namespace eaglet::kernels
