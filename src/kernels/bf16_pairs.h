// The packed BF16 layout that AMX tiles (and VNNI-style pair dot products) read: the matrix
// [N, K] in blocks of 16 rows; inside a block, K in pairs, one 64-byte line per pair holding
// elements (r, 2p) and (r, 2p + 1) of the block's 16 rows side by side. N is padded to 16 rows and
// K to 32 with zeros, so 16 consecutive lines are exactly one AMX B tile (16 pairs x 16 output
// columns) and one line is one 512-bit register of 16 pairs.
//
// The activations read with it are BF16 rows [round_up(M, 16), Kp] with the padding zeroed, so an
// A tile (16 rows x 32 values) can always be loaded and padded products add exact zeros.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_bytes.h"
#include "core/dtype.h"

namespace eaglet::kernels {

inline constexpr int64_t kPairRows = 16;  // weight rows per block: one tile of output columns
inline constexpr int64_t kPairK = 32;     // K per tile: 16 pairs

inline int64_t pairs_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
inline int64_t pairs_padded_k(int64_t K) { return pairs_round_up(K, kPairK); }
inline size_t bf16_pairs_bytes(int64_t rows, int64_t K) {
  return size_t(pairs_round_up(rows, kPairRows)) * size_t(pairs_padded_k(K)) * sizeof(bf16_t);
}
// Where element (r, k) lives, in BF16 elements from the start.
inline size_t bf16_pairs_index(int64_t K, int64_t r, int64_t k) {
  const int64_t lines = pairs_padded_k(K) / 2;  // pairs per block
  return size_t(((r / kPairRows) * lines + k / 2) * kPairRows + r % kPairRows) * 2 + size_t(k % 2);
}

// Row-major BF16 [rows, K] in the pairs layout (padding zeroed).
AlignedBytes pack_bf16_pairs(const bf16_t* w, int64_t rows, int64_t K);

// Activations as the pairs kernels read them: x [M, K] rounded to BF16 into `out`, rows
// bf16_pairs_activation_stride(K) values apart, round_up(M, 16) rows; padding rows and columns are
// zero. The stride is Kp plus one cache line: an A tile loads 16 rows at once, and rows a multiple
// of 4 KB apart (K = 2048) would all fall in one L1 set.
inline int64_t bf16_pairs_activation_stride(int64_t K) { return pairs_padded_k(K) + kPairK; }
inline size_t bf16_pairs_activation_count(int64_t M, int64_t K) {
  return size_t(pairs_round_up(M, kPairRows)) * size_t(bf16_pairs_activation_stride(K));
}
// F32 to BF16 with f32_to_bf16's exact bits (round to nearest even, NaN kept quiet); the ISA
// tables' `to_bf16` vectorise it.
using ToBf16Fn = void (*)(const float* x, int64_t n, bf16_t* out);
void to_bf16_scalar(const float* x, int64_t n, bf16_t* out);
void bf16_pairs_activations(const float* x, int64_t M, int64_t K, bf16_t* out, ToBf16Fn to_bf16 = to_bf16_scalar);

// Rows and bytes per row of each of the eight tiles a tile kernel configures (tile_matmul.inl,
// tile_ggml.inl): the BF16 kernels use 64-byte rows throughout, the INT8 kernel 32-byte A rows.
struct TileShape {
  uint8_t rows[8];
  uint8_t colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
};

}  // namespace eaglet::kernels
