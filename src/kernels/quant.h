// FP8 weight formats of the MiniMax releases, decoded straight from the checkpoint bytes.
//
//   e4m3 (OCP "fn" variant): s eeee mmm, bias 7, no infinities, S.1111.111 is NaN.
//   FP8 block (MiniMax-M2): one F32 scale per 128x128 block of the [N, K] matrix,
//     w[n, k] = e4m3(byte) * scale[n / 128, k / 128]   (scale tensor `weight_scale_inv`).
//   MXFP8 (MiniMax-M3): one E8M0 exponent byte per 32 consecutive inputs of a row,
//     w[n, k] = e4m3(byte) * 2^(scale[n, k / 32] - 127), 0xFF = NaN.
//
// The SIMD kernels turn e4m3 into F16 with a sign-extend, a shift and a mask (exactly e4m3 / 256 for
// every finite code, subnormals included) and fold the 256 into the per-block scale, so no
// dequantised copy of a matrix ever exists.
#pragma once
#include <cstdint>

namespace eaglet::kernels {

enum class QuantScheme : uint8_t {
  None,        // dtype F32/BF16
  Fp8Block128, // F8_E4M3 + F32 scales [ceil(N/128), ceil(K/128)]
  Mxfp8,       // F8_E4M3 + U8 E8M0 scales [N, K/32]
  Q8_0,        // dtype U8: GGUF blocks with their rows interleaved by 8 (kernels/ggml_interleave.h)
  Q4_0,
  Q4_K,
  Q6_K,
};

inline bool is_ggml_blocks(QuantScheme q) {
  return q == QuantScheme::Q8_0 || q == QuantScheme::Q4_0 || q == QuantScheme::Q4_K || q == QuantScheme::Q6_K;
}
// Weights per block along a row (K must be a multiple), and bytes per block of 8 interleaved rows
// (16 rows take twice as many: the interleaved groups hold the rows' blocks and nothing else).
inline constexpr int64_t kGroupBytesQ4_K = 1184, kGroupBytesQ6_K = 2192;
inline int64_t ggml_block_weights(QuantScheme q) { return q == QuantScheme::Q8_0 || q == QuantScheme::Q4_0 ? 32 : 256; }
inline int64_t ggml_group_bytes(QuantScheme q) {
  switch (q) {
    case QuantScheme::Q8_0: return 8 * 34;
    case QuantScheme::Q4_0: return 8 * 18;
    case QuantScheme::Q4_K: return kGroupBytesQ4_K;
    case QuantScheme::Q6_K: return kGroupBytesQ6_K;
    default: return 0;
  }
}
// Bytes of a whole matrix interleaved by `group` (8 or 16) rows: rows padded to a whole group.
inline int64_t ggml_matrix_bytes(QuantScheme q, int64_t rows, int64_t K, int64_t group = 8) {
  return (rows + group - 1) / group * (group / 8) * (K / ggml_block_weights(q)) * ggml_group_bytes(q);
}

inline constexpr int kMxGroup = 32;    // inputs per MXFP8 scale
inline constexpr int kFp8Block = 128;  // rows and columns per FP8 block scale

float e4m3_to_f32(uint8_t code);
float e8m0_to_f32(uint8_t code);  // 2^(code - 127); NaN for 0xFF

// Where the scale of weight (n, k) lives; `scale256` folds in the 2^8 the F16 trick leaves out.
struct Fp8Scales {
  QuantScheme scheme = QuantScheme::None;
  const void* data = nullptr;
  int64_t K = 0;

  int64_t block_cols() const { return (K + kFp8Block - 1) / kFp8Block; }
  float scale(int64_t n, int64_t k) const;  // the scale exactly as the format defines it
  // scale * 256 (for F16-decoded weights); inline, as the kernels call it once per 32 weights.
  float scale256(int64_t n, int64_t k) const {
    if (scheme == QuantScheme::Mxfp8) {
      const uint32_t e = static_cast<const uint8_t*>(data)[n * (K / kMxGroup) + k / kMxGroup];
      const uint32_t bits = e >= 247 ? (e == 0xff ? 0x7fc00000u : 0x7f800000u) : (e + 8) << 23;
      float f;
      __builtin_memcpy(&f, &bits, 4);
      return f;
    }
    return static_cast<const float*>(data)[(n / kFp8Block) * block_cols() + k / kFp8Block] * 256.0f;
  }
  // True when scale * 256 overflows for some weight of rows [n0, n1) (E8M0 codes 247-254, or
  // block scales beyond 2^119): those rows need the two-multiply decode.
  bool any_huge(int64_t n0, int64_t n1) const;
};

}  // namespace eaglet::kernels
