// The tiled FP8 (e4m3) matmul microkernel of the AVX-512 file (AVX2 streams one row at a time
// instead, matmul_fp8_avx2.cpp says why). The engine supplies
// `decode`, which widens kStep e4m3 bytes to F32 and multiplies by the block's scale; the loop
// structure mirrors simd_matmul.inl, so each output element again owns one accumulator that walks
// K in the same steps whatever M, the tile or the thread count (batch invariance, see ops.h).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/quant.h"

namespace eaglet::kernels::simd {


// `Huge`: some scale * 256 overflows F32, so the 256 is applied separately (same values, two
// multiplies); real checkpoints never need it, but every E8M0 code must decode exactly.
template <class E, int MR, int NR, bool Huge>
inline void fp8_tile(const float* x, int64_t K, const uint8_t* w, const Fp8Scales& s, int64_t n,
                     float* y, int64_t ldy) {
  static_assert(kMxGroup % E::kStep == 0);
  typename E::Acc acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = E::zero();
  const uint8_t* wr[NR];
#pragma GCC unroll 4
  for (int j = 0; j < NR; ++j) wr[j] = w + (n + j) * K;
  for (int64_t k = 0; k < K; k += kMxGroup) {
    float sc[NR];
    bool nan = false;  // NaN codes are rare enough (never, in real weights) to take the exact path
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
      sc[j] = Huge ? s.scale(n + j, k) : s.scale256(n + j, k);
      nan |= E::group_has_nan(wr[j] + k);
    }
#pragma GCC unroll 2
    for (int h = 0; h < kMxGroup; h += E::kStep) {
      typename E::Acc wv[NR];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j)
        wv[j] = Huge  ? E::decode_huge(wr[j] + k + h, sc[j])
                : nan ? E::decode_exact(wr[j] + k + h, sc[j])
                      : E::decode(wr[j] + k + h, sc[j]);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const auto xv = E::load_x(x + i * K + k + h);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = E::madd(acc[i][j], xv, wv[j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = E::reduce(acc[i][j]);
}

template <class E, int NR, bool Huge>
inline void fp8_tile_rows(int mr, const float* x, int64_t K, const uint8_t* w, const Fp8Scales& s,
                          int64_t n, float* y, int64_t ldy) {
  switch (mr) {
    case 1: fp8_tile<E, 1, NR, Huge>(x, K, w, s, n, y, ldy); break;
    case 2: if constexpr (E::kMR >= 2) fp8_tile<E, 2, NR, Huge>(x, K, w, s, n, y, ldy); break;
    case 3: if constexpr (E::kMR >= 3) fp8_tile<E, 3, NR, Huge>(x, K, w, s, n, y, ldy); break;
    case 4: if constexpr (E::kMR >= 4) fp8_tile<E, 4, NR, Huge>(x, K, w, s, n, y, ldy); break;
  }
}

// y[m, n] for n0 <= n < n1; K must be a multiple of kMxGroup (checked when weights load).
template <class E, bool Huge>
void matmul_fp8_rows(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s,
                     int64_t n0, int64_t n1, float* y, int64_t ldy) {
  constexpr int NR = 4;  // also for decode: one row at a time measured slower in whole decode steps
  const int64_t MB = std::max<int64_t>(E::kMR, (256 * 1024) / std::max<int64_t>(1, K * 4));
  for (int64_t mb = 0; mb < M; mb += MB) {
    const int64_t me = std::min(M, mb + MB);
    for (int64_t n = n0; n < n1; n += NR) {
      const int nr = int(std::min<int64_t>(NR, n1 - n));
      for (int64_t m = mb; m < me; m += E::kMR) {
        const int mr = int(std::min<int64_t>(E::kMR, me - m));
        float* ys = y + m * ldy + n;
        if (nr == NR) {
          fp8_tile_rows<E, NR, Huge>(mr, x + m * K, K, w, s, n, ys, ldy);
        } else {
          for (int j = 0; j < nr; ++j) fp8_tile_rows<E, 1, Huge>(mr, x + m * K, K, w, s, n + j, ys + j, ldy);
        }
      }
    }
  }
}

template <class E>
void matmul_fp8(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s, int64_t n0,
                int64_t n1, float* y, int64_t ldy) {
  matmul_fp8_rows<E, false>(x, M, K, w, s, n0, n1, y, ldy);
  // A scale whose * 256 overflows (never in real checkpoints) turns its rows' outputs non-finite:
  // only then recompute those rows with the exact two-multiply decode.
  for (int64_t n = n0; n < n1; ++n) {
    bool finite = true;
    for (int64_t m = 0; m < M; ++m) finite &= std::isfinite(y[m * ldy + n]);
    if (!finite && s.any_huge(n, n + 1)) matmul_fp8_rows<E, true>(x, M, K, w, s, n, n + 1, y, ldy);
  }
}

}  // namespace eaglet::kernels::simd
