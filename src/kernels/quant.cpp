#include "kernels/quant.h"

#include <cmath>
#include <cstring>
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

float Fp8Scales::scale256(int64_t n, int64_t k) const {
  if (scheme == QuantScheme::Mxfp8) {
    const uint8_t e = static_cast<const uint8_t*>(data)[n * (K / kMxGroup) + k / kMxGroup];
    if (e == 0xff) return std::numeric_limits<float>::quiet_NaN();
    if (e >= 247) return std::numeric_limits<float>::infinity();  // 2^(e-119) overflows F32
    const uint32_t bits = uint32_t(e + 8) << 23;                  // always a normal float
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return scale(n, k) * 256.0f;
}

}  // namespace eaglet::kernels
