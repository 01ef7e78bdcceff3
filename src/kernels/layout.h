#pragma once
#include <cstdint>

namespace eaglet::kernels {

// How a matrix's elements lie in memory. Checkpoints give RowMajor; kernels::pack (pack.h) turns
// a matrix into the layout the active kernels read, so only the kernel layer knows layouts.
enum class Layout : uint8_t {
  RowMajor,     // as in the file: rows of K elements (GGUF: rows of blocks)
  Rows8,        // GGUF blocks with rows interleaved in groups of 8: 256-bit kernels (ggml_interleave.h)
  Rows16,       // the same in groups of 16: AVX-512 VNNI registers and AMX INT8 tiles
  Bf16Pairs16,  // BF16 in blocks of 16 rows, K in pairs: the AMX / VNNI tile layout (bf16_pairs.h)
  Fp8Pairs16,   // e4m3 bytes in the same order, scales reordered per tile (fp8_pairs.h)
};

}  // namespace eaglet::kernels
