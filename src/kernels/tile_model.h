// A portable model of the AMX tile operations the BF16 pairs kernel uses, in plain C++ following
// the instruction reference's semantics: eight tile registers of 16 rows x 64 bytes, loads and
// stores with a row stride, TILEZERO, and TDPBF16PS (for each row m, pair p and column n:
// c[m][n] += a[m][2p] * b[p][2n], then += a[m][2p + 1] * b[p][2n + 1], each a BF16 x BF16 product,
// exact in F32, added with round-to-nearest-even).
//
// The tile kernel (tile_matmul.inl) is written once over a backend with this interface; run over
// this model it tests the packing, padding and tiling logic on every machine, and it is what the
// real AMX kernel is checked against where AMX exists.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/bf16_pairs.h"

namespace eaglet::kernels {

class TileModel {
 public:
  static constexpr int kRows = 16, kRowBytes = 64;

  void configure(const TileShape& s) { std::memcpy(rows_, s.rows, sizeof(rows_)); }
  void release() {}
  template <int T>
  void zero() {
    std::memset(tiles_[T], 0, sizeof(tiles_[T]));
  }
  template <int T>
  void load(const void* src, size_t stride) {
    std::memset(tiles_[T], 0, sizeof(tiles_[T]));  // rows past the configured ones read as zero
    for (int r = 0; r < rows_[T]; ++r) std::memcpy(tiles_[T][r], static_cast<const uint8_t*>(src) + r * stride, kRowBytes);
  }
  template <int T>
  void store(void* dst, size_t stride) const {
    for (int r = 0; r < rows_[T]; ++r) std::memcpy(static_cast<uint8_t*>(dst) + r * stride, tiles_[T][r], kRowBytes);
  }
  template <int C, int A, int B>
  void dpbf16ps() {
    for (int m = 0; m < rows_[C]; ++m)
      for (int p = 0; p < rows_[B]; ++p)
        for (int n = 0; n < kRowBytes / 4; ++n) {
          float c = f32(C, m, n);
          c += bf16(A, m, 2 * p) * bf16(B, p, 2 * n);
          c += bf16(A, m, 2 * p + 1) * bf16(B, p, 2 * n + 1);
          std::memcpy(tiles_[C][m] + 4 * n, &c, 4);
        }
  }

 private:
  float f32(int t, int r, int i) const {
    float v;
    std::memcpy(&v, tiles_[t][r] + 4 * i, 4);
    return v;
  }
  float bf16(int t, int r, int i) const {
    bf16_t v;
    std::memcpy(&v, tiles_[t][r] + 2 * i, 2);
    return bf16_to_f32(v);
  }

  alignas(64) uint8_t tiles_[8][kRows][kRowBytes] = {};
  uint8_t rows_[8] = {16, 16, 16, 16, 16, 16, 16, 16};
};

}  // namespace eaglet::kernels
