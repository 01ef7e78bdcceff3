// Vector loops shared by the AVX2 and AVX-512 files, written once over an engine that supplies an
// F32 vector type V of kWidth lanes with load, store, set1 and fmadd. Included, not compiled
// alone, so each ISA file instantiates it with its own target flags.
#pragma once
#include <cstdint>

namespace eaglet::kernels::simd {

// out += sum over rows r < n, in order, of w[r] * (rows + r * stride), for the leading whole
// vectors of out; returns where the tail (fewer than kWidth floats) starts. Four vectors of out
// stay in registers across all rows: per lane the same chain of multiply-adds as axpy() row after
// row, without a store and reload between rows.
template <class E>
int64_t axpy_rows_vectors(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out) {
  constexpr int W = E::kWidth;
  int64_t i = 0;
  for (; i + 4 * W <= dim; i += 4 * W) {
    typename E::V a0 = E::load(out + i), a1 = E::load(out + i + W);
    typename E::V a2 = E::load(out + i + 2 * W), a3 = E::load(out + i + 3 * W);
    for (int64_t r = 0; r < n; ++r) {
      const typename E::V wr = E::set1(w[r]);
      const float* x = rows + r * stride + i;
      a0 = E::fmadd(wr, E::load(x), a0);
      a1 = E::fmadd(wr, E::load(x + W), a1);
      a2 = E::fmadd(wr, E::load(x + 2 * W), a2);
      a3 = E::fmadd(wr, E::load(x + 3 * W), a3);
    }
    E::store(out + i, a0);
    E::store(out + i + W, a1);
    E::store(out + i + 2 * W, a2);
    E::store(out + i + 3 * W, a3);
  }
  for (; i + W <= dim; i += W) {
    typename E::V a = E::load(out + i);
    for (int64_t r = 0; r < n; ++r) a = E::fmadd(E::set1(w[r]), E::load(rows + r * stride + i), a);
    E::store(out + i, a);
  }
  return i;
}

}  // namespace eaglet::kernels::simd
