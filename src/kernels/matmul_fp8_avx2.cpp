// AVX2 FP8 (e4m3) matmul, streaming one weight row at a time.
//
// Why not the tiled template (simd_fp8_matmul.inl) the AVX-512 engine uses: on AVX2 the e4m3
// decode (widen, shift, mask, F16 -> F32) is most of the work, and a 4-row tile reads four
// streams at once. Measured on a Zen 3 core (Mxfp8, K = 2048, 1024 x 2048 x 128 matrices): the
// tile decoded 4.5-5.7 GB/s; one sequential stream with the scale applied once per 32-weight group
// (to the group's partial sum, not to every weight) 9-10 GB/s, against ~10.5 GB/s with the weights
// in L2, so decode is now close to compute-bound instead of stalling on four streams.
//
// Batch invariance: every output y[m, n] is computed by the same operation sequence, whatever M,
// the row range or the thread count: per group, g = sum of 4 products in order (one multiply,
// three fused multiply-adds, 8 lanes each), then acc = fma(g, scale * 256, acc); finally the
// lanes are summed in a fixed tree. Batches of more than kMR activation rows decode the row again
// for each kMR-block rather than changing the per-output arithmetic.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/isa_table.h"
#include "kernels/quant.h"

namespace eaglet::kernels::avx2 {
namespace {

constexpr int kMR = 4;              // activation rows per decoded weight row: 4 w + 4 acc + g
constexpr int64_t kPrefetch = 1024; // bytes ahead in the row stream (flat 900-2048 on Zen 3)

float reduce(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 e4m3 bytes -> 16 F16 bit patterns of value / 256. Sign extension puts the sign at bit 15
// after the shift (and a copy at bit 14, masked off). NaN codes (S.1111.111) come out as
// +-480 / 256; `Exact` turns them into F16 NaN.
template <bool Exact>
__m256i f16_bits(__m128i b) {
  __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16(int16_t(0xbf80)));
  if constexpr (Exact) {
    const __m256i mag = _mm256_set1_epi16(0x3f80);
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, mag), mag);
    h = _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7e00)));
  }
  return h;
}

// Per-group scales of one weight row, times 256 (the decode yields value / 256), as a broadcast
// vector. Read in order of k, once per 32 weights, so the hot loop holds no scheme switch.
struct MxScales {  // E8M0 per 32: 2^(e - 127) * 256 is (e + 8) << 23 as F32 bits
  const uint8_t* e = nullptr;
  void row(const Fp8Scales& s, int64_t n) { e = static_cast<const uint8_t*>(s.data) + n * (s.K / kMxGroup); }
  // Codes whose * 256 overflows (247..255) saturate to infinity: the caller notices the
  // non-finite output and recomputes those rows with ExactScales.
  __m256 at(int64_t k) const {
    const uint32_t bits = std::min<uint32_t>(e[k / kMxGroup] + 8u, 255u) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return _mm256_set1_ps(f);
  }
};

struct BlockScales {  // F32 per 128 x 128 block (finite * 256 overflows only beyond 2^119)
  const float* r = nullptr;
  void row(const Fp8Scales& s, int64_t n) { r = static_cast<const float*>(s.data) + (n / kFp8Block) * s.block_cols(); }
  __m256 at(int64_t k) const { return _mm256_set1_ps(r[k / kFp8Block] * 256.0f); }
};

struct ExactScales {  // any scheme, the 256 applied to the group sum (see rows())
  const Fp8Scales* s = nullptr;
  int64_t n = 0;
  void row(const Fp8Scales& sc, int64_t r) { s = &sc, n = r; }
  __m256 at(int64_t k) const { return _mm256_set1_ps(s->scale(n, k)); }
};

// Rows [n0, n1) for activation rows [m0, m0 + MR). With ExactScales some scale * 256 overflows
// F32, so the 256 goes onto the group sum first (exact: a power of two). Returns whether any
// weight of these rows was a NaN code (which only the Exact pass decodes as NaN).
template <int MR, bool Exact, class Scales>
bool rows(const float* x, int64_t K, const uint8_t* w, const Fp8Scales& s, int64_t n0, int64_t n1, float* y,
          int64_t ldy) {
  constexpr bool kHuge = std::is_same_v<Scales, ExactScales>;
  const __m256i low7 = _mm256_set1_epi8(0x7f);
  __m256i seen = _mm256_setzero_si256();  // running max of (code & 0x7f): 0x7f means a NaN code
  Scales scales;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wr = w + n * K;
    scales.row(s, n);
    __m256 acc[MR];
    for (int m = 0; m < MR; ++m) acc[m] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += kMxGroup) {
      _mm_prefetch(reinterpret_cast<const char*>(wr + k + kPrefetch), _MM_HINT_T0);
      // The halves are loaded again below rather than extracted from `b`: two 16-byte loads
      // (L1 hits) into vpmovsxbw measured faster on Zen 3 than vextracti128 here.
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + k));
      if constexpr (!Exact) seen = _mm256_max_epu8(seen, _mm256_and_si256(b, low7));
      const __m256i h0 = f16_bits<Exact>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + k)));
      const __m256i h1 = f16_bits<Exact>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + k + 16)));
      const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h0));
      const __m256 w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1));
      const __m256 w2 = _mm256_cvtph_ps(_mm256_castsi256_si128(h1));
      const __m256 w3 = _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1));
      const __m256 sc = scales.at(k);
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) {
        const float* xm = x + m * K + k;
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(xm), w0);
        g = _mm256_fmadd_ps(_mm256_loadu_ps(xm + 8), w1, g);
        g = _mm256_fmadd_ps(_mm256_loadu_ps(xm + 16), w2, g);
        g = _mm256_fmadd_ps(_mm256_loadu_ps(xm + 24), w3, g);
        if constexpr (kHuge) g = _mm256_mul_ps(g, _mm256_set1_ps(256.0f));
        acc[m] = _mm256_fmadd_ps(g, sc, acc[m]);
      }
    }
    for (int m = 0; m < MR; ++m) y[m * ldy + n] = reduce(acc[m]);
  }
  return _mm256_movemask_epi8(_mm256_cmpeq_epi8(seen, low7)) != 0;
}

template <bool Exact, class Scales>
bool rows_mr(int mr, const float* x, int64_t K, const uint8_t* w, const Fp8Scales& s, int64_t n0, int64_t n1,
             float* y, int64_t ldy) {
  switch (mr) {
    case 1: return rows<1, Exact, Scales>(x, K, w, s, n0, n1, y, ldy);
    case 2: return rows<2, Exact, Scales>(x, K, w, s, n0, n1, y, ldy);
    case 3: return rows<3, Exact, Scales>(x, K, w, s, n0, n1, y, ldy);
    default: return rows<4, Exact, Scales>(x, K, w, s, n0, n1, y, ldy);
  }
}

// All activation rows against weight rows [n0, n1), kMR at a time.
template <bool Exact, class Scales>
bool all_rows(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s, int64_t n0, int64_t n1,
              float* y, int64_t ldy) {
  bool nan = false;
  for (int64_t m = 0; m < M; m += kMR)
    nan |= rows_mr<Exact, Scales>(int(std::min<int64_t>(kMR, M - m)), x + m * K, K, w, s, n0, n1, y + m * ldy, ldy);
  return nan;
}

}  // namespace

// y[m, n] for n0 <= n < n1; K is a multiple of kMxGroup (checked when weights load).
void matmul_fp8(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s, int64_t n0,
                int64_t n1, float* y, int64_t ldy) {
  // Row blocks of 64 keep the second pass over a NaN-holding block (never, in real weights) local.
  constexpr int64_t kRowBlock = 64;
  const bool mx = s.scheme == QuantScheme::Mxfp8;
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = std::min(n1, nb + kRowBlock);
    const bool nan = mx ? all_rows<false, MxScales>(x, M, K, w, s, nb, ne, y, ldy)
                        : all_rows<false, BlockScales>(x, M, K, w, s, nb, ne, y, ldy);
    for (int64_t n = nb; n < ne; ++n) {
      bool finite = true;
      for (int64_t m = 0; m < M; ++m) finite &= std::isfinite(y[m * ldy + n]);
      // A scale whose * 256 overflows (never in real checkpoints) turns its rows' outputs
      // non-finite: only then recompute with the 256 applied separately.
      if (!finite && s.any_huge(n, n + 1)) all_rows<true, ExactScales>(x, M, K, w, s, n, n + 1, y, ldy);
      else if (nan && mx) all_rows<true, MxScales>(x, M, K, w, s, n, n + 1, y, ldy);
      else if (nan) all_rows<true, BlockScales>(x, M, K, w, s, n, n + 1, y, ldy);
    }
  }
}

}  // namespace eaglet::kernels::avx2
