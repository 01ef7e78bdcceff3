#include "kernels/fp8_pairs.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace eaglet::kernels {

size_t fp8_pairs_scale_bytes(QuantScheme q, int64_t rows, int64_t K) {
  if (q == QuantScheme::Mxfp8) return size_t(pairs_round_up(rows, kPairRows) / kPairRows) * size_t(K / kMxGroup) * kMxTileRecord;
  return size_t((rows + kFp8Block - 1) / kFp8Block) * size_t((K + kFp8Block - 1) / kFp8Block) * sizeof(float);
}

namespace {

// Where the code pair (row i, inputs 2p and 2p + 1) of a tile goes inside it, in 2-byte units:
// the two are adjacent there as in the row (fp8_tile_code_pos of an even element).
struct TilePairPositions {
  uint16_t at[kPairRows][kPairK / 2];
  TilePairPositions() {
    for (int i = 0; i < kPairRows; ++i)
      for (int p = 0; p < kPairK / 2; ++p) at[i][p] = uint16_t(fp8_tile_code_pos(p, 2 * i) / 2);
  }
};

bool all_normal(const uint8_t* c, int64_t n) {
  bool normal = true;
  for (int64_t j = 0; j < n; ++j) normal &= e4m3_is_normal(c[j]);
  return normal;
}

}  // namespace

// Tile by tile: each row's 32 codes are read in a run and moved as 16 pairs inside the tile's 512
// bytes, which stay in L1 (element by element through fp8_pairs_index it ran at 0.25 GB/s, this
// at ~1 GB/s on one core of the Intel Xeon VM).
AlignedBytes pack_fp8_pairs(const uint8_t* codes, const void* scales, QuantScheme q, int64_t rows, int64_t K) {
  EAGLET_CHECK(K % kPairK == 0, "internal: FP8 pairs need K ({}) a multiple of {}", K, kPairK);
  EAGLET_CHECK(q == QuantScheme::Mxfp8 || q == QuantScheme::Fp8Block128, "internal: FP8 pairs of a non-FP8 scheme");
  static const TilePairPositions pos;
  const size_t code_bytes = fp8_pairs_code_bytes(rows, K);
  AlignedBytes out(code_bytes + fp8_pairs_scale_bytes(q, rows, K), 0);
  uint8_t* s = out.data() + code_bytes;
  const int64_t groups = K / kPairK, blocks = pairs_round_up(rows, kPairRows) / kPairRows;
  const auto* e = static_cast<const uint8_t*>(scales);
  for (int64_t rb = 0; rb < blocks; ++rb)
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* tile = out.data() + fp8_pairs_tile_offset(K, rb, g);
      bool normal = (rb + 1) * kPairRows <= rows;  // padding rows hold zero codes
      for (int64_t i = 0; i < kPairRows && rb * kPairRows + i < rows; ++i) {
        const uint8_t* src = codes + (rb * kPairRows + i) * K + g * kPairK;
        for (int64_t p = 0; p < kPairK / 2; ++p) std::memcpy(tile + 2 * pos.at[i][p], src + 2 * p, 2);
        normal = normal && all_normal(src, kPairK);
      }
      if (q != QuantScheme::Mxfp8) continue;
      uint8_t* record = s + (rb * groups + g) * kMxTileRecord;
      for (int64_t i = 0; i < kPairRows; ++i) {
        const int64_t r = rb * kPairRows + i;
        record[i] = r < rows ? e[r * groups + g] : uint8_t(127);
      }
      record[kPairRows] = normal;
    }
  if (q == QuantScheme::Fp8Block128) std::memcpy(s, scales, fp8_pairs_scale_bytes(q, rows, K));
  return out;
}

float fp8_pairs_scale(QuantScheme q, const void* scales, int64_t K, int64_t r, int64_t k) {
  const Fp8TileScales t = fp8_pairs_tile_scales(q, scales, K, r / kPairRows, k / kPairK);
  return t.e8m0 ? e8m0_to_f32(t.e8m0[r % kPairRows]) : t.block;
}

bf16_t decode_fp8(uint8_t code, float scale) {
  const float v = e4m3_to_f32(code) * scale;
  if (std::isnan(v)) return bf16_t(0x7fc0);
  // Below F32's normal range: zero, as VCVTNE2PS2BF16 (which treats denormal inputs as zero) and
  // the AMX products (which read BF16 denormals as zero) would have it.
  if (v != 0.0f && std::fabs(v) < 0x1p-126f) return bf16_t(std::signbit(v) ? 0x8000 : 0);
  return f32_to_bf16(v);
}

void decode_fp8_tile(const uint8_t* codes, const Fp8TileScales& s, bf16_t* out) {
  for (int64_t i = 0; i < kFp8TileBytes; ++i) {  // out[i]: line i / 32, element i % 32 (row i % 32 / 2)
    const uint8_t code = codes[fp8_tile_code_pos(i / 32, i % 32)];
    out[i] = decode_fp8(code, s.e8m0 ? e8m0_to_f32(s.e8m0[(i % 32) / 2]) : s.block);
  }
}

}  // namespace eaglet::kernels
