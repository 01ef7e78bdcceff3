// llama.cpp's GGUF block types: their byte layouts, decoded exactly as
// ggml defines them (ggml-common.h / ggml-quants.c), and the round-to-nearest quantisers eaglet
// uses to quantise safetensors weights on load. Blocks run along a row (the input dimension);
// all scales are IEEE half precision.
//
//   Q8_0 (34 bytes / 32 weights):  d, int8 q[32]                      w = d * q
//   Q4_0 (18 bytes / 32 weights):  d, q[16] nibbles                   w = d * (nibble - 8);
//        byte j holds weight j (low nibble) and weight j + 16 (high nibble)
//   Q4_K (144 bytes / 256 weights): d, dmin, 12 bytes of 6-bit (scale, min) pairs for eight
//        sub-blocks of 32, q[128] nibbles; w = d * scale_s * nibble - dmin * min_s. Each 64
//        weights share 32 bytes: sub-block 2i in the low nibbles, 2i + 1 in the high ones.
//   Q6_K (210 bytes / 256 weights): ql[128] low 4 bits, qh[64] high 2 bits, int8 scales[16]
//        (one per 16 weights), d; w = d * scale * (q - 32), laid out in two halves of 128.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "io/gguf_types.h"

namespace eaglet::kernels {

// The GGUF file's type table lives with the format (io/gguf_types.h); the kernels name it too.
using ::eaglet::ggml_row_bytes;
using ::eaglet::ggml_type_info;
using ::eaglet::GgmlType;
using ::eaglet::GgmlTypeInfo;

#pragma pack(push, 1)
struct BlockQ8_0 {
  f16_t d;
  int8_t q[32];
};
struct BlockQ4_0 {
  f16_t d;
  uint8_t q[16];
};
struct BlockQ4_K {
  f16_t d, dmin;
  uint8_t scales[12];
  uint8_t q[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  f16_t d;
};
#pragma pack(pop)
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ6_K) == 210);

// Sub-block s (0..7) of a Q4_K block: its 6-bit scale and min.
void q4k_scale_min(const uint8_t* scales, int s, uint8_t* scale, uint8_t* min);
// The 256 codes of a Q6_K block, q - 32 (-32..31), in weight order.
void q6k_codes(const BlockQ6_K& b, int8_t* out);

// n weights (a multiple of the type's block) from `src` to F32.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Activations for the integer dot products against GGUF block weights: each row cut into blocks
// of 32 with an F32 scale (finer than ggml's F16 one), codes -127..127, and the codes' sum (Q4_0
// multiplies the unsigned nibbles and takes 8 * sum off after; Q4_K takes its mins off with it). Quantised per row and
// block alone, so a row's codes never depend on the batch it came with.
struct ActBlockQ8 {
  float d;
  int32_t sum;
  int8_t q[32];
};
// x [M, K] (K a multiple of 32) to M * K / 32 blocks.
void quantize_activations(const float* x, int64_t M, int64_t K, ActBlockQ8* out);

// Round-to-nearest quantisers (n a multiple of 32), as llama-quantize's reference path does:
// Q8_0 d = amax / 127; Q4_0 d = (the value of largest magnitude) / -8, codes clamped to 0..15.
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);
// Q4_K by round to nearest (n a multiple of 256); see ggml_quant.cpp for how it differs from
// llama-quantize's search.
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n);


}  // namespace eaglet::kernels
