#include "kernels/bf16_pairs.h"

#include <algorithm>
#include <cstring>

namespace eaglet::kernels {

AlignedBytes pack_bf16_pairs(const bf16_t* w, int64_t rows, int64_t K) {
  AlignedBytes out(bf16_pairs_bytes(rows, K), 0);
  auto* p = reinterpret_cast<bf16_t*>(out.data());
  const int64_t lines = pairs_padded_k(K) / 2;
  for (int64_t r = 0; r < rows; ++r) {  // row r's pairs land 16 pairs apart in its block
    bf16_t* dst = p + ((r / kPairRows) * lines * kPairRows + r % kPairRows) * 2;
    const bf16_t* src = w + r * K;
    for (int64_t k = 0; k + 1 < K; k += 2) {
      dst[k / 2 * kPairRows * 2] = src[k];
      dst[k / 2 * kPairRows * 2 + 1] = src[k + 1];
    }
    if (K % 2) dst[(K / 2) * kPairRows * 2] = src[K - 1];
  }
  return out;
}

void to_bf16_scalar(const float* x, int64_t n, bf16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

void bf16_pairs_activations(const float* x, int64_t M, int64_t K, bf16_t* out, ToBf16Fn to_bf16) {
  const int64_t ld = bf16_pairs_activation_stride(K);
  for (int64_t m = 0; m < M; ++m) {
    to_bf16(x + m * K, K, out + m * ld);
    std::fill(out + m * ld + K, out + (m + 1) * ld, bf16_t(0));
  }
  std::fill(out + M * ld, out + pairs_round_up(M, kPairRows) * ld, bf16_t(0));
}

}  // namespace eaglet::kernels
