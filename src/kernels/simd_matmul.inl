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
  const int64_t k_full = K - K % E::kStep;
  int64_t k = 0;
#pragma GCC unroll 4
  for (; k < k_full; k += E::kStep) {
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

// Decode: one row of x against NR weight rows at a time, the weight loads interleaved with the
// multiply-adds and K unrolled. Written as the plain loop it is: the same arithmetic through
// tile<E, 1, NR> streams weights ~10% slower (measured on a Zen 3 VM). Per output element the
// steps are exactly tile's, so decode and batched rows stay bitwise equal.
template <class E, int NR, class XT, class WT>
void matvec(const XT* x, int64_t K, const WT* w, int64_t n0, int64_t n1, float* y) {
  const int64_t k_full = K - K % E::kStep;
  const int rem = int(K - k_full);
  int64_t n = n0;
  for (; n + NR <= n1; n += NR) {
    const WT* ws = w + n * K;
    typename E::Acc acc[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[j] = E::zero();
#pragma GCC unroll 4
    for (int64_t k = 0; k < k_full; k += E::kStep) {
      const auto xv = E::load_x(x + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[j] = E::madd(acc[j], xv, E::load_w(ws + j * K + k));
    }
    if (rem) {
      const auto xv = E::load_x_n(x + k_full, rem);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[j] = E::madd(acc[j], xv, E::load_w_n(ws + j * K + k_full, rem));
    }
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) y[n + j] = E::reduce(acc[j]);
  }
  for (; n < n1; ++n) tile<E, 1, 1>(x, K, w + n * K, y + n, 1);
}

// Column grouping only decides which accumulators live side by side; each output element's
// accumulation order is the same, so choosing NR by M keeps batch invariance. A single row
// (decode) streams more weight rows at once to keep more memory requests in flight.
template <class E, class XT, class WT>
void matmul(const XT* x, int64_t M, int64_t K, const WT* w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  if (M == 1)
    matvec<E, E::kDecodeNR>(x, K, w, n0, n1, y);
  else
    matmul_nr<E, E::kNR>(x, M, K, w, n0, n1, y, ldy);
}

}  // namespace eaglet::kernels::simd
