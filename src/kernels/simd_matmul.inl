// The matmul microkernel shared by the AVX2 and AVX-512 files, written once over an "engine"
// type that supplies the vector type and its loads, multiply-add and reduction. Included (not
// compiled alone) so each ISA file instantiates it with its own target flags.
//
// Each output element owns one accumulator that walks K in the same steps whatever the tile
// shape, which keeps results independent of M, tiling and threads (see ops.h).
#pragma once
#include <algorithm>
#include <cstdint>

namespace eaglet::kernels::simd {



// The small fixed loops are unrolled explicitly: left as loops, GCC keeps the accumulators in
// memory and every multiply-add waits on a store (3x slower at 4 rows).
template <class E, int MR, int NR, class XT, class WT>
inline void tile(const XT* x, int64_t K, const WT* w, float* y, int64_t ldy) {
  typename E::Acc acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = E::zero();
  int64_t k = 0;
  for (; k + E::kStep <= K; k += E::kStep) {
    typename E::W wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wv[j] = E::load_w(w + j * K + k);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const auto xv = E::load_x(x + i * K + k);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = E::madd(acc[i][j], xv, wv[j]);
    }
  }
  if (k < K) {
    const int rem = int(K - k);
    typename E::W wv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) wv[j] = E::load_w_n(w + j * K + k, rem);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const auto xv = E::load_x_n(x + i * K + k, rem);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = E::madd(acc[i][j], xv, wv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = E::reduce(acc[i][j]);
}

template <class E, int NR, class XT, class WT>
inline void tile_rows(int mr, const XT* x, int64_t K, const WT* w, float* y, int64_t ldy) {
  static_assert(E::kMR >= 1 && E::kMR <= 4);
  switch (mr) {
    case 1: tile<E, 1, NR>(x, K, w, y, ldy); break;
    case 2: if constexpr (E::kMR >= 2) tile<E, 2, NR>(x, K, w, y, ldy); break;
    case 3: if constexpr (E::kMR >= 3) tile<E, 3, NR>(x, K, w, y, ldy); break;
    case 4: if constexpr (E::kMR >= 4) tile<E, 4, NR>(x, K, w, y, ldy); break;
  }
}

template <class E, int NR, class XT, class WT>
void matmul_nr(const XT* x, int64_t M, int64_t K, const WT* w, int64_t n0, int64_t n1, float* y,
               int64_t ldy) {
  // Blocks of rows of x small enough to stay in L2 while every weight tile streams past them.
  const int64_t MB = std::max<int64_t>(E::kMR, (256 * 1024) / std::max<int64_t>(1, K * int64_t(sizeof(XT))));
  for (int64_t mb = 0; mb < M; mb += MB) {
    const int64_t me = std::min(M, mb + MB);
    for (int64_t n = n0; n < n1; n += NR) {
      const int nr = int(std::min<int64_t>(NR, n1 - n));
      for (int64_t m = mb; m < me; m += E::kMR) {
        const int mr = int(std::min<int64_t>(E::kMR, me - m));
        const XT* xs = x + m * K;
        const WT* ws = w + n * K;
        float* ys = y + m * ldy + n;
        if (nr == NR) {
          tile_rows<E, NR>(mr, xs, K, ws, ys, ldy);
        } else {
          for (int j = 0; j < nr; ++j) tile_rows<E, 1>(mr, xs, K, ws + j * K, ys + j, ldy);
        }
      }
    }
  }
}

// Column grouping only decides which accumulators live side by side; each output element's
// accumulation order is the same, so choosing NR by M keeps batch invariance. A single row
// (decode) streams more weight rows at once to keep more memory requests in flight.
template <class E, class XT, class WT>
void matmul(const XT* x, int64_t M, int64_t K, const WT* w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  if (M == 1)
    matmul_nr<E, E::kDecodeNR>(x, M, K, w, n0, n1, y, ldy);
  else
    matmul_nr<E, 4>(x, M, K, w, n0, n1, y, ldy);
}

}  // namespace eaglet::kernels::simd
