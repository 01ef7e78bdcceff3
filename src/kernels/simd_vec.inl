// Vector loops shared by the AVX2 and AVX-512 files, written once over an engine that supplies an
// F32 vector type V of kWidth lanes with load, store, set1, fmadd, add, mul, div, max, min,
// round (to nearest), pow2 (2^n for integral n in [-126, 127]), below (x < lo ? 0 : y) and hmax /
// hsum (horizontal max and sum). Included, not compiled alone, so each ISA file instantiates it
// with its own target flags.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace eaglet::kernels::simd {

// One lane of the same arithmetic (vector tails): with -mfma std::fma is one instruction, and
// nearbyint rounds to nearest even like the vector round.
struct Lane {
  using V = float;
  static constexpr int kWidth = 1;
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V set1(float a) { return a; }
  static V fmadd(V a, V b, V c) { return std::fma(a, b, c); }
  static V add(V a, V b) { return a + b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V min(V a, V b) { return a < b ? a : b; }
  static V round(V a) { return std::nearbyint(a); }
  static V pow2(V n) {
    if (n != n) return n;  // NaN (converting it to an integer is undefined)
    const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static V below(V x, V lo, V y) { return x < lo ? 0.0f : y; }
};

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

// e^x, within 2 ulp of the true value for x in [-87.3, 88.3] (0 below, 2^127.5 above), by the
// usual reduction x = n ln2 + r, |r| <= ln2 / 2, and a degree-6 polynomial for e^r (Cephes's
// expf coefficients); NaN stays NaN. Only basic IEEE operations in a fixed order, so every lane and every ISA
// built on it gives the same bits.
template <class E>
typename E::V exp(typename E::V x) {
  using V = typename E::V;
  const V lo = E::set1(-87.33654475f), hi = E::set1(88.37626266f);
  const V xc = E::min(hi, E::max(lo, x));  // this operand order lets NaN through (max/minps return b)
  const V n = E::round(E::mul(xc, E::set1(1.44269504089f)));
  V r = E::fmadd(n, E::set1(-0.693359375f), xc);  // ln2 in two parts, so n * ln2 is exact
  r = E::fmadd(n, E::set1(2.12194440e-4f), r);
  V p = E::set1(1.9875691500e-4f);
  p = E::fmadd(p, r, E::set1(1.3981999507e-3f));
  p = E::fmadd(p, r, E::set1(8.3334519073e-3f));
  p = E::fmadd(p, r, E::set1(4.1665795894e-2f));
  p = E::fmadd(p, r, E::set1(1.6666665459e-1f));
  p = E::fmadd(p, r, E::set1(5.0000001201e-1f));
  const V er = E::add(E::fmadd(E::mul(p, r), r, r), E::set1(1.0f));
  return E::below(x, lo, E::mul(er, E::pow2(n)));
}

// out = silu(g) * u = g / (1 + e^-g) * u from element i on, while whole vectors of E fit;
// returns where it stopped.
template <class E>
int64_t silu_mul_from(int64_t i, const float* g, const float* u, float* out, int64_t n) {
  for (; i + E::kWidth <= n; i += E::kWidth) {
    const typename E::V x = E::load(g + i);
    const typename E::V e = exp<E>(E::mul(x, E::set1(-1.0f)));
    E::store(out + i, E::mul(E::div(x, E::add(E::set1(1.0f), e)), E::load(u + i)));
  }
  return i;
}

// The whole of silu_mul: vectors, then the tail one lane at a time with the same arithmetic.
template <class E>
void silu_mul(const float* g, const float* u, float* out, int64_t n) {
  silu_mul_from<Lane>(silu_mul_from<E>(0, g, u, out, n), g, u, out, n);
}

// In place softmax, the tail (n not a multiple of kWidth) through `T`, an engine of one lane with
// the same arithmetic, so a score's exponential does not depend on where it falls. Attention's
// scores: one row per (token, head), whatever batch the token came in.
template <class E, class T>
void softmax(float* x, int64_t n) {
  constexpr int W = E::kWidth;
  int64_t i = 0;
  typename E::V vmax = E::set1(-3.402823466e38f);
  for (; i + W <= n; i += W) vmax = E::max(vmax, E::load(x + i));
  float mx = E::hmax(vmax);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const typename E::V neg_max = E::set1(-mx);
  typename E::V vsum = E::set1(0.0f);
  for (i = 0; i + W <= n; i += W) {
    const typename E::V e = exp<E>(E::add(E::load(x + i), neg_max));
    E::store(x + i, e);
    vsum = E::add(vsum, e);
  }
  float sum = E::hsum(vsum);
  for (; i < n; ++i) {
    x[i] = exp<T>(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (i = 0; i + W <= n; i += W) E::store(x + i, E::mul(E::load(x + i), E::set1(inv)));
  for (; i < n; ++i) x[i] *= inv;
}

}  // namespace eaglet::kernels::simd
