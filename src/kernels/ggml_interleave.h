// GGUF block matrices as the kernels read them: rows interleaved in groups of R = 8 (256-bit
// kernels) or 16 (AVX-512 VNNI and AMX INT8; Layout::Rows16), the last group padded with zero
// rows, each group's blocks in order. One load of 4R bytes then holds 4 consecutive codes of each
// of the R rows, so one broadcast of 4 activation codes feeds R rows at once and a block ends as R
// row sums in one register, with no horizontal reduction (llama.cpp's CPU "repack" buffers do the
// same for the same reason). With R = 16 the 8 chunks of a 32-weight block are also exactly one
// AMX INT8 B tile (8 rows of 64 bytes: K in groups of 4, 16 output columns). Throughout, "chunk c"
// is 4R bytes holding, for each row r, 4 bytes at 4 * r: the codes 4c..4c+3 of that row's
// sub-block.
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

#include "core/aligned_bytes.h"
#include "kernels/ggml_quant.h"
#include "kernels/layout.h"
#include "kernels/quant.h"

namespace eaglet::kernels {

inline constexpr int kRowGroup = 8;     // Layout::Rows8
inline constexpr int kRowGroup16 = 16;  // Layout::Rows16
inline int row_group(Layout l) { return l == Layout::Rows16 ? kRowGroup16 : kRowGroup; }

template <int R>
struct GroupQ8_0 {
  f16_t d[R];
  int8_t q[8][4 * R];
};
template <int R>
struct GroupQ4_0 {
  f16_t d[R];
  uint8_t q[4][4 * R];
};
template <int R>
struct GroupQ4_K {
  f16_t d[R], dmin[R];
  uint8_t scales[8][R];
  uint8_t mins[8][R];
  uint8_t q[4][8][4 * R];  // [pair of sub-blocks][chunk]
};
template <int R>
struct GroupQ6_K {
  f16_t d[R];
  int8_t scales[16][R];
  int8_t q[64][4 * R];
};
using BlockQ8_0x8 = GroupQ8_0<8>;
using BlockQ4_0x8 = GroupQ4_0<8>;
using BlockQ4_Kx8 = GroupQ4_K<8>;
using BlockQ6_Kx8 = GroupQ6_K<8>;
using BlockQ8_0x16 = GroupQ8_0<16>;
using BlockQ4_0x16 = GroupQ4_0<16>;
static_assert(sizeof(BlockQ8_0x8) == 8 * sizeof(BlockQ8_0) && sizeof(BlockQ4_0x8) == 8 * sizeof(BlockQ4_0));
static_assert(sizeof(BlockQ4_Kx8) == kGroupBytesQ4_K && sizeof(BlockQ6_Kx8) == kGroupBytesQ6_K);
static_assert(sizeof(BlockQ8_0x16) == 16 * sizeof(BlockQ8_0) && sizeof(BlockQ4_0x16) == 16 * sizeof(BlockQ4_0));
static_assert(sizeof(GroupQ4_K<16>) == 2 * kGroupBytesQ4_K && sizeof(GroupQ6_K<16>) == 2 * kGroupBytesQ6_K);

// The GGUF type stored as `q`, and the scheme a GGUF type is stored as (None when it has none).
GgmlType ggml_type_of(QuantScheme q);
QuantScheme interleaved_scheme(GgmlType type);

// GGUF-layout rows ([rows, cols / block] blocks of `type`) interleaved by `group` (8 or 16) rows.
AlignedBytes interleave_rows(GgmlType type, const void* blocks, int64_t rows, int64_t cols,
                                     int group = kRowGroup);
// Row `r` of an interleaved Q8_0 / Q4_0 matrix back in GGUF layout (embedding lookups, tests).
void deinterleave_row(GgmlType type, const void* interleaved, int64_t cols, int64_t r, void* out,
                      int group = kRowGroup);

}  // namespace eaglet::kernels
