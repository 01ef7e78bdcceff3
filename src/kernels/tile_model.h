// A portable model of the AMX tile operations the tile kernels use, in plain C++ following the
// instruction reference's semantics: eight tile registers of up to 16 rows x 64 bytes, each with
// its configured rows and bytes per row; loads and stores with a row stride, TILEZERO;
// TDPBF16PS (for each row m and column n: the even elements' products a[m][2p] * b[p][2n] summed
// in pair order, the odd elements' a[m][2p + 1] * b[p][2n + 1] likewise, then c[m][n] += even +
// odd; each product of two BF16 is exact in F32 and each addition rounds to nearest even. The
// instruction reference describes one product added after another; this is what the hardware
// does, bit for bit on random data of exponents 2^-100..2^100 and zeros, on the Xeons we measured,
// and what amx_table's self-test checks; the hardware also flushes denormals, which this model
// does not); TDPBSSD (c[m][n] += the sum over p and i < 4 of
// a[m][4p + i] * b[p][4n + i], signed bytes, in 32-bit integers).
//
// The tile kernels (tile_matmul.inl, tile_ggml.inl) are written once over a backend with this
// interface; run over this model they test the packing, padding and tiling logic on every
// machine, and the model is what the real AMX kernels are checked against where AMX exists. The
// INT8 kernel's vector steps (unpacking nibbles, scaling a tile's sums) and the FP8 decoder are
// plain loops here with the same float operations as the AVX-512 backend.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/bf16_pairs.h"
#include "kernels/fp8_pairs.h"
#include "kernels/ggml_quant.h"

namespace eaglet::kernels {

class TileModel {
 public:
  static constexpr int kRows = 16, kRowBytes = 64;

  void configure(const TileShape& s) {
    std::memcpy(rows_, s.rows, sizeof(rows_));
    std::memcpy(colsb_, s.colsb, sizeof(colsb_));
  }
  void release() {}
  template <int T>
  void zero() {
    std::memset(tiles_[T], 0, sizeof(tiles_[T]));
  }
  template <int T>
  void load(const void* src, size_t stride) {
    std::memset(tiles_[T], 0, sizeof(tiles_[T]));  // rows and bytes past the configured ones read as zero
    for (int r = 0; r < rows_[T]; ++r) std::memcpy(tiles_[T][r], static_cast<const uint8_t*>(src) + r * stride, colsb_[T]);
  }
  template <int T>
  void store(void* dst, size_t stride) const {
    for (int r = 0; r < rows_[T]; ++r) std::memcpy(static_cast<uint8_t*>(dst) + r * stride, tiles_[T][r], colsb_[T]);
  }
  template <int C, int A, int B>
  void dpbf16ps() {
    for (int m = 0; m < rows_[C]; ++m)
      for (int n = 0; n < colsb_[C] / 4; ++n) {
        float even = 0.0f, odd = 0.0f;
        for (int p = 0; p < rows_[B]; ++p) {
          even += bf16(A, m, 2 * p) * bf16(B, p, 2 * n);
          odd += bf16(A, m, 2 * p + 1) * bf16(B, p, 2 * n + 1);
        }
        const float c = f32(C, m, n) + (even + odd);
        std::memcpy(tiles_[C][m] + 4 * n, &c, 4);
      }
  }
  template <int C, int A, int B>
  void dpbssd() {
    for (int m = 0; m < rows_[C]; ++m)
      for (int n = 0; n < colsb_[C] / 4; ++n) {
        int32_t c;
        std::memcpy(&c, tiles_[C][m] + 4 * n, 4);
        for (int p = 0; p < rows_[B]; ++p)
          for (int i = 0; i < 4; ++i)
            c += int32_t(int8_t(tiles_[A][m][4 * p + i])) * int32_t(int8_t(tiles_[B][p][4 * n + i]));
        std::memcpy(tiles_[C][m] + 4 * n, &c, 4);
      }
  }

  // The INT8 kernel's vector steps (tile_ggml.inl says what each does).
  struct Acc {
    float v[kRows][16];
  };
  static void clear(Acc& acc) { std::memset(acc.v, 0, sizeof(acc.v)); }
  static void add_block(Acc& acc, const int32_t (*c)[16], int rows, const f16_t* dw, const float* dx) {
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < 16; ++n) acc.v[m][n] = std::fma(f16_to_f32(dw[n]) * dx[m], float(c[m][n]), acc.v[m][n]);
  }
  static void write(const Acc& acc, int rows, int cols, float* y, int64_t ldy) {
    for (int m = 0; m < rows; ++m) std::memcpy(y + m * ldy, acc.v[m], size_t(cols) * sizeof(float));
  }
  static void decode_fp8(const uint8_t* codes, const Fp8TileScales& s, uint8_t* out) {
    decode_fp8_tile(codes, s, reinterpret_cast<bf16_t*>(out));
  }
  static void unpack_q4_0(const uint8_t (*q)[64], int8_t* b) {
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 64; ++j) {
        b[64 * c + j] = int8_t((q[c][j] & 0x0F) - 8);
        b[64 * (c + 4) + j] = int8_t((q[c][j] >> 4) - 8);
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
  uint8_t colsb_[8] = {64, 64, 64, 64, 64, 64, 64, 64};
};

}  // namespace eaglet::kernels
