// The FP8 (e4m3) matmul microkernel shared by the AVX2 and AVX-512 files. The engine supplies
// `decode`, which widens kStep e4m3 bytes to F32 and multiplies by the block's scale; the loop
// structure mirrors simd_matmul.inl, so each output element again owns one accumulator that walks
// K in the same steps whatever M, the tile or the thread count (batch invariance, see ops.h).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/quant.h"

namespace eaglet::kernels::simd {

template <class E, int MR, int NR>
inline void fp8_tile(const float* x, int64_t K, const uint8_t* w, const Fp8Scales& s, int64_t n,
                     float* y, int64_t ldy) {
  static_assert(kMxGroup % E::kStep == 0);
  typename E::Acc acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = E::zero();
  for (int64_t k = 0; k < K; k += kMxGroup) {
    float sc[NR];
    bool huge[NR];  // scale * 256 overflows F32 (E8M0 codes >= 247): apply the 256 separately
    for (int j = 0; j < NR; ++j) {
      sc[j] = s.scale256(n + j, k);
      huge[j] = std::isinf(sc[j]);
      if (huge[j]) sc[j] = s.scale(n + j, k);
    }
    for (int h = 0; h < kMxGroup; h += E::kStep) {
      typename E::Acc wv[NR];
      for (int j = 0; j < NR; ++j)
        wv[j] = huge[j] ? E::decode_huge(w + (n + j) * K + k + h, sc[j]) : E::decode(w + (n + j) * K + k + h, sc[j]);
      for (int i = 0; i < MR; ++i) {
        const auto xv = E::load_x(x + i * K + k + h);
        for (int j = 0; j < NR; ++j) acc[i][j] = E::madd(acc[i][j], xv, wv[j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = E::reduce(acc[i][j]);
}

template <class E, int NR>
inline void fp8_tile_rows(int mr, const float* x, int64_t K, const uint8_t* w, const Fp8Scales& s,
                          int64_t n, float* y, int64_t ldy) {
  switch (mr) {
    case 1: fp8_tile<E, 1, NR>(x, K, w, s, n, y, ldy); break;
    case 2: if constexpr (E::kMR >= 2) fp8_tile<E, 2, NR>(x, K, w, s, n, y, ldy); break;
    case 3: if constexpr (E::kMR >= 3) fp8_tile<E, 3, NR>(x, K, w, s, n, y, ldy); break;
    case 4: if constexpr (E::kMR >= 4) fp8_tile<E, 4, NR>(x, K, w, s, n, y, ldy); break;
  }
}

// y[m, n] for n0 <= n < n1; K must be a multiple of kMxGroup (checked when weights load).
template <class E>
void matmul_fp8(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s,
                int64_t n0, int64_t n1, float* y, int64_t ldy) {
  constexpr int NR = 4;
  const int64_t MB = std::max<int64_t>(E::kMR, (256 * 1024) / std::max<int64_t>(1, K * 4));
  for (int64_t mb = 0; mb < M; mb += MB) {
    const int64_t me = std::min(M, mb + MB);
    for (int64_t n = n0; n < n1; n += NR) {
      const int nr = int(std::min<int64_t>(NR, n1 - n));
      for (int64_t m = mb; m < me; m += E::kMR) {
        const int mr = int(std::min<int64_t>(E::kMR, me - m));
        float* ys = y + m * ldy + n;
        if (nr == NR) {
          fp8_tile_rows<E, NR>(mr, x + m * K, K, w, s, n, ys, ldy);
        } else {
          for (int j = 0; j < nr; ++j) fp8_tile_rows<E, 1>(mr, x + m * K, K, w, s, n + j, ys + j, ldy);
        }
      }
    }
  }
}

}  // namespace eaglet::kernels::simd
