// FP8 (e4m3, MXFP8 or 128-block scales) on the BF16 tiles: each 16 x 32 weight tile of the FP8
// pairs layout (fp8_pairs.h) is decoded to BF16 with its scale folded in, by the backend's vector
// unit, and multiplied by the tile products of tile_matmul.inl. Written once over a tile backend
// (real AMX or the tile model), which supplies `decode_fp8(codes, scales, out)`.
//
// Up to 32 rows (decode, verification) a weight tile is decoded into a 1 KB slot one tile ahead of
// its product, so the weights are read from memory once, one byte each, and the BF16 never leaves L1.
// More rows (prefill) decode two blocks of 16 weight rows whole into a caller's panel, which every
// 32 rows of activations then pass: decoding is the costly part, and it is done once per weight.
// Either way each output accumulates its K tiles in order from zero, as for BF16 weights, so any M
// gives the bits of M = 1.
#pragma once
#include <cstdint>

#include "kernels/fp8_pairs.h"
#include "kernels/tile_matmul.inl"

namespace eaglet::kernels::tiles {
namespace {

// B tiles of FP8 weights, decoded on demand. Scales are the packed ones (fp8_pairs.h).
template <class Tiles>
struct Fp8Blocks {
  // A constructor, not aggregate initialisation, so the 8 KB of slots are not zeroed every call.
  Fp8Blocks(const uint8_t* c, const void* s, QuantScheme q, int64_t k, uint8_t* panel)
      : codes(c), scales(s), scheme(q), K(k), panel_buf(panel) {}
  const uint8_t* codes;
  const void* scales;
  QuantScheme scheme;
  int64_t K;
  uint8_t* panel_buf;  // 2 * (K / 2) * 64 bytes, for M > 32
  // M <= 32: tiles k and k + 32 of up to four blocks. The next tile is decoded while the current
  // one is multiplied, so a tile load never waits on the stores that just wrote its slot.
  alignas(64) uint8_t slot[2][4][kFp8TileBytes * 2];

  Fp8TileScales tile_scales(int64_t nb, int64_t g) const { return fp8_pairs_tile_scales(scheme, scales, K, nb, g); }
  const uint8_t* codes_at(int64_t nb, int64_t g) const { return codes + fp8_pairs_tile_offset(K, nb, g); }
  // Tiles are asked for in order nb, nb + 1, ... (up to four at a time), each block's in k order:
  // block nb % 4's slots are its own.
  const uint8_t* tile(int64_t nb, int64_t k) {
    const int64_t g = k / kPairK;
    uint8_t* out = slot[g % 2][nb % 4];
    if (g == 0) Tiles::decode_fp8(codes_at(nb, 0), tile_scales(nb, 0), out);
    // Each block is its own stream of codes; asking for each 4 tiles (2 KB) ahead made M = 1 ~10%
    // faster than the hardware prefetcher alone (2-core Intel Xeon VM).
    if (g + 4 < K / kPairK) {
      const uint8_t* p = codes_at(nb, g + 4);
      for (int i = 0; i < kFp8TileBytes / 64; ++i) __builtin_prefetch(p + 64 * i);
    }
    if (g + 1 < K / kPairK) Tiles::decode_fp8(codes_at(nb, g + 1), tile_scales(nb, g + 1), slot[(g + 1) % 2][nb % 4]);
    return out;
  }
  const uint8_t* panel(int64_t nb, int64_t count) {
    const int64_t groups = K / kPairK;
    for (int64_t j = 0; j < count; ++j)
      for (int64_t g = 0; g < groups; ++g)
        Tiles::decode_fp8(codes_at(nb + j, g), tile_scales(nb + j, g), panel_buf + size_t(j * groups + g) * kFp8TileBytes * 2);
    return panel_buf;
  }
  size_t panel_block_bytes() const { return size_t(K / kPairK) * kFp8TileBytes * 2; }
};

// y[m, n] for m < M and n0 <= n < n1 (n0 a multiple of 16). x: BF16 activations as
// bf16_pairs_activations lays them out; w: the FP8 pairs layout of [N, K] (K a multiple of 32),
// `scales` its packed scales; `panel`: 2 * K / 32 decoded tiles of scratch (only for M > 32).
template <class Tiles>
void matmul_fp8_pairs(Tiles& t, const bf16_t* x, int64_t M, int64_t K, const void* w, const void* scales,
                      QuantScheme scheme, int64_t n0, int64_t n1, float* y, int64_t ldy, uint8_t* panel) {
  const size_t x_stride = size_t(K + kPairK) * sizeof(bf16_t);  // bf16_pairs_activation_stride
  Fp8Blocks<Tiles> b(static_cast<const uint8_t*>(w), scales, scheme, K, panel);
  run_tiles(t, x, M, K, x_stride, b, n0, n1, y, ldy);
}

}  // namespace
}  // namespace eaglet::kernels::tiles
