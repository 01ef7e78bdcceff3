// GGUF block matrices as the kernels read them: rows interleaved in groups of 8 (the last group
// padded with zero rows), each group's blocks in order. One 32-byte load then holds 4 consecutive
// codes of each of the 8 rows, so one broadcast of 4 activation codes feeds 8 rows at once and a
// block ends as 8 row sums in one register, with no horizontal reduction (llama.cpp's CPU
// "repack" buffers do the same for the same reason). Throughout, "chunk c" is 32 bytes holding,
// for each row r, 4 bytes at 4 * r: the codes 4c..4c+3 of that row's sub-block.
//
//   Q8_0: the GGUF codes as they are; chunk c = codes 4c..4c+3.
//   Q4_0: the GGUF bytes as they are; chunk c (0..3) = weights 4c..4c+3 in the low nibbles and
//         16+4c..16+4c+3 in the high ones.
//   Q4_K: scales and mins unpacked from 6 bits to bytes, [sub-block][row]; the codes of sub-blocks
//         2p and 2p+1 share 8 chunks, 2p in the low nibbles, as in the GGUF block.
//   Q6_K: codes widened to int8 (q - 32) so the kernel needs no bit unpacking; 30% more bytes
//         than the file, still a fifth of F32. Scales [sub-block of 16][row].
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ggml_quant.h"
#include "kernels/quant.h"

namespace eaglet::kernels {

inline constexpr int kRowGroup = 8;

struct BlockQ8_0x8 {
  f16_t d[8];
  int8_t q[8][32];
};
struct BlockQ4_0x8 {
  f16_t d[8];
  uint8_t q[4][32];
};
struct BlockQ4_Kx8 {
  f16_t d[8], dmin[8];
  uint8_t scales[8][8];
  uint8_t mins[8][8];
  uint8_t q[4][8][32];  // [pair of sub-blocks][chunk]
};
struct BlockQ6_Kx8 {
  f16_t d[8];
  int8_t scales[16][8];
  int8_t q[64][32];
};
static_assert(sizeof(BlockQ8_0x8) == 8 * sizeof(BlockQ8_0) && sizeof(BlockQ4_0x8) == 8 * sizeof(BlockQ4_0));
static_assert(sizeof(BlockQ4_Kx8) == kGroupBytesQ4_K && sizeof(BlockQ6_Kx8) == kGroupBytesQ6_K);

// The GGUF type stored as `q`, and the scheme a GGUF type is stored as (None when it has none).
GgmlType ggml_type_of(QuantScheme q);
QuantScheme interleaved_scheme(GgmlType type);

// GGUF-layout rows ([rows, cols / block] blocks of `type`) in the interleaved layout.
std::vector<uint8_t> interleave_rows(GgmlType type, const void* blocks, int64_t rows, int64_t cols);
// Row `r` of an interleaved Q8_0 / Q4_0 matrix back in GGUF layout (tests).
void deinterleave_row(GgmlType type, const void* interleaved, int64_t cols, int64_t r, void* out);

}  // namespace eaglet::kernels
