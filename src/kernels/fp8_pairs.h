// FP8 (e4m3) weights in the tile layout of bf16_pairs.h, one byte per weight: blocks of 16 rows,
// K in pairs, one 32-byte line per pair holding elements (r, 2p) and (r, 2p + 1) of the block's
// 16 rows (two lines interleaved by 8 bytes, fp8_tile_code_pos). Widening a line to BF16 gives
// the pairs layout's 64-byte line, so 16 lines (one 32-input group: exactly one MXFP8 scale per
// row) decode into one AMX B tile. The tile kernels decode each tile into L1 as they go: weights
// stream from memory at one byte each and no BF16 copy of a matrix exists.
//
// The scales follow the codes in the same buffer: MXFP8's E8M0 bytes reordered so a tile's 16
// (one per row) are contiguous, then a byte saying whether every code of the tile is a normal
// number (not zero, subnormal or NaN; the decoder then needs no lookup), [N / 16][K / 32][17]
// (padding rows: scale 127 = 2^0, codes zero); FP8 block's F32 [ceil(N / 128)][ceil(K / 128)] as
// in the file (a 16 x 32 tile lies inside one 128 x 128 block).
//
// Decoding a tile gives BF16 of e4m3 * scale, rounded to nearest even (exact for MXFP8, whose
// scales are powers of two; FP8 block scales round to BF16's 8 bits, 1/32 of an e4m3 step), with
// results below F32's normal range flushed to signed zero, as AMX and VCVTNE2PS2BF16 read them.
// NaN codes and NaN scales decode to NaN.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_bytes.h"
#include "core/dtype.h"
#include "kernels/bf16_pairs.h"
#include "kernels/quant.h"

namespace eaglet::kernels {

inline constexpr int64_t kFp8TileBytes = kPairRows * kPairK;  // 16 lines of 32 codes
inline constexpr int64_t kMxTileRecord = kPairRows + 1;        // a tile's E8M0 bytes and its flag

// Code bytes of an [N, K] matrix in the layout (rows padded to 16; K is a multiple of 32).
inline size_t fp8_pairs_code_bytes(int64_t rows, int64_t K) {
  return size_t(pairs_round_up(rows, kPairRows)) * size_t(K);
}
// Tile (row block rb, input group g): 16 lines of 32 bytes at this offset. (This and
// fp8_pairs_tile_scales have internal linkage: the AMX kernel file calls them too, and an inline
// function's copy compiled there for AMX must never be the one baseline code links to.)
static inline size_t fp8_pairs_tile_offset(int64_t K, int64_t rb, int64_t g) {
  return (size_t(rb) * size_t(K / kPairK) + size_t(g)) * size_t(kFp8TileBytes);
}
// Inside a tile, the bytes of lines 2c and 2c + 1 (element e = 2 * row + k % 2 of a line) share a
// 64-byte chunk, in the order a byte unpack of the chunk's decoded bytes puts back in line order:
// 8 bytes of line 2c, 8 of line 2c + 1, and so on.
inline int64_t fp8_tile_code_pos(int64_t line, int64_t e) {
  return 64 * (line / 2) + 16 * (e / 8) + 8 * (line % 2) + e % 8;
}
inline size_t fp8_pairs_index(int64_t K, int64_t r, int64_t k) {
  return fp8_pairs_tile_offset(K, r / kPairRows, k / kPairK) +
         size_t(fp8_tile_code_pos((k % kPairK) / 2, (r % kPairRows) * 2 + k % 2));
}
// Bytes of the reordered scales (after the codes).
size_t fp8_pairs_scale_bytes(QuantScheme q, int64_t rows, int64_t K);

// Codes and scales of row-major e4m3 [rows, K] (scales as the format defines them, quant.h) in
// the layout; `scale_bytes` of the result is everything after the codes.
AlignedBytes pack_fp8_pairs(const uint8_t* codes, const void* scales, QuantScheme q, int64_t rows, int64_t K);

// The scales of one tile as the decoders take them.
struct Fp8TileScales {
  const uint8_t* e8m0 = nullptr;  // MXFP8: 16 exponents, one per row of the tile
  float block = 0;                // FP8 block: the tile's one scale
  bool normal = false;            // MXFP8: every code of the tile is a normal number
};
// Whether an e4m3 code is a normal number: exponent field 1..15, and not NaN (S.1111.111).
constexpr bool e4m3_is_normal(uint8_t c) { return (c & 0x78) != 0 && (c & 0x7f) != 0x7f; }
// `scales`: the packed scales (what follows the codes).
static inline Fp8TileScales fp8_pairs_tile_scales(QuantScheme q, const void* scales, int64_t K, int64_t rb, int64_t g) {
  if (q == QuantScheme::Mxfp8) {
    const uint8_t* r = static_cast<const uint8_t*>(scales) + (size_t(rb) * size_t(K / kPairK) + size_t(g)) * kMxTileRecord;
    return {r, 0, r[kPairRows] != 0};
  }
  const int64_t block_cols = (K + kFp8Block - 1) / kFp8Block;
  return {nullptr, static_cast<const float*>(scales)[(rb * kPairRows / kFp8Block) * block_cols + g * kPairK / kFp8Block]};
}
// The scale of weight (r, k), as quant.h defines it.
float fp8_pairs_scale(QuantScheme q, const void* scales, int64_t K, int64_t r, int64_t k);

// One tile's 512 codes to its 512 BF16 values (a B tile: 16 lines of 64 bytes), exactly as the
// AVX-512 decoder gives them (which reads `normal` only to pick its path): the portable model's
// decoder, and the AVX-512 one's for tiles with NaN codes or scales.
void decode_fp8_tile(const uint8_t* codes, const Fp8TileScales& s, bf16_t* out);
// One weight the way decode_fp8_tile decodes it.
bf16_t decode_fp8(uint8_t code, float scale);

namespace avx512 {
// decode_fp8_tile on AVX-512 (fp8_decode_avx512.cpp, which needs AVX-512 BF16 and VBMI): the same
// bits, `out` the tile's 16 lines of 64 bytes. The AMX kernel's decoder, and the AVX-512 BF16
// vector kernel's for more than 8 rows and for the tiles it does not rebase in registers.
void decode_fp8_tile_vbmi(const uint8_t* codes, const Fp8TileScales& s, uint8_t* out);
}  // namespace avx512

}  // namespace eaglet::kernels
