// The AVX-512 FP8 tile decoder (fp8_pairs.h): one 16 x 32 tile of e4m3 codes to its BF16 pairs
// with the scale folded in, as the tile model's scalar decoder gives them. The AMX kernel decodes
// each tile just before its tile product; the AVX-512 BF16 vector kernel (pairs_avx512.cpp)
// decodes a few tiles ahead of its vdpbf16ps loop. Compiled for AVX-512 BF16 and VBMI (VPERMT2B):
// every AMX CPU and AMD Zen 4 / 5 have both; tables without VBMI never call it.
#include <immintrin.h>

#include "kernels/fp8_pairs.h"
#include "kernels/fp8_rebase_avx512.inl"

namespace eaglet::kernels::avx512 {
namespace {

// The BF16 bits of the e4m3 magnitudes 0..127 (every finite one exact; 127 is NaN), split into
// low and high bytes for VPERMT2B.
constexpr uint16_t e4m3_bf16_bits(int m) {
  const int e = m >> 3, f = m & 7;
  if (m == 0x7f) return 0x7fc0;
  if (e > 0) return uint16_t((e + 120) << 7 | f << 4);  // 2^(e - 7) * (1 + f / 8)
  if (f == 0) return 0;
  const int top = f >= 4 ? 2 : f >= 2 ? 1 : 0;  // subnormal f * 2^-9 = 2^(top - 9) * (f / 2^top)
  return uint16_t((127 + top - 9) << 7 | (f - (1 << top)) << (7 - top));
}
struct Fp8Lut {
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t hi[128];
};
constexpr Fp8Lut make_fp8_lut() {
  Fp8Lut t{};
  for (int m = 0; m < 128; ++m) t.lo[m] = uint8_t(e4m3_bf16_bits(m)), t.hi[m] = uint8_t(e4m3_bf16_bits(m) >> 8);
  return t;
}
constexpr Fp8Lut kFp8Lut = make_fp8_lut();


void rebase(const uint8_t* codes, __m512i bias, uint8_t* out);
bool exponent_add(const uint8_t* codes, __m512i adj, uint8_t* out);
bool multiply(const uint8_t* codes, __m512 lo, __m512 hi, uint8_t* out);

// One FP8 tile (16 lines of 32 codes, fp8_pairs.h) to BF16 pairs with the scale folded in.
// MXFP8 scales that keep every value a normal BF16 (E8M0 10..246, all real checkpoints) are
// added to the exponent field: on a tile of normal codes only (the packer's flag; most tiles of
// real weights), the code's bits are moved into BF16's place and rebased without a lookup.
// Otherwise two byte lookups (VPERMT2B over 128 entries) give the BF16 of each code's
// magnitude, exact; the sign goes onto the high byte and a byte unpack puts each chunk back in
// line order; then the exponent add, or for other scales an F32 multiply (exact for powers of
// two) rounded to BF16. Tiles with a NaN code or scale take the scalar decoder.
void decode(const uint8_t* codes, const Fp8TileScales& s, uint8_t* out) {
  auto* o = reinterpret_cast<bf16_t*>(out);
  const __m512i pairs = _mm512_loadu_si512(kPairIndex);
  bool nan = false;
  if (s.e8m0) {
    const __m128i e = fp8_tile_e8m0(s.e8m0);
    if (_mm_cmpeq_epi8_mask(e, _mm_set1_epi8(char(0xff)))) return decode_fp8_tile(codes, s, o);
    if (e8m0_rebases(e)) {
      if (s.normal) return rebase(codes, fp8_rebase_bias(e), out);
      // (e - 127) << 7 for each row: the scale's exponent, added to the looked-up BF16
      const __m256i adj16 = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_cvtepu8_epi16(e), _mm256_set1_epi16(127)), 7);
      nan = exponent_add(codes, _mm512_permutexvar_epi16(pairs, _mm512_castsi256_si512(adj16)), out);
    } else {  // 2^(e - 127): E8M0 0 is F32's denormal 2^-127
      const __m512i e32 = _mm512_cvtepu8_epi32(e);
      const __m512i bits = _mm512_mask_mov_epi32(_mm512_slli_epi32(e32, 23), _mm512_cmpeq_epi32_mask(e32, _mm512_setzero_si512()),
                                                 _mm512_set1_epi32(0x00400000));
      const __m512 lo = _mm512_permutexvar_ps(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(pairs)), _mm512_castsi512_ps(bits));
      const __m512 hi = _mm512_permutexvar_ps(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(pairs, 1)), _mm512_castsi512_ps(bits));
      nan = multiply(codes, lo, hi, out);
    }
  } else {
    if (!(s.block - s.block == 0.0f)) return decode_fp8_tile(codes, s, o);  // inf or NaN
    nan = multiply(codes, _mm512_set1_ps(s.block), _mm512_set1_ps(s.block), out);
  }
  if (nan) decode_fp8_tile(codes, s, o);
}
// The lookups for chunk `ch` (lines 2 ch and 2 ch + 1): the BF16 of each code, signed, as
// w[0] (line 2 ch) and w[1]. `seen` keeps the largest high byte of a magnitude: 0x7f only for
// the NaN code (finite ones reach 0x43).
struct Lut {
  __m512i lo0 = _mm512_load_si512(kFp8Lut.lo), lo1 = _mm512_load_si512(kFp8Lut.lo + 64);
  __m512i hi0 = _mm512_load_si512(kFp8Lut.hi), hi1 = _mm512_load_si512(kFp8Lut.hi + 64);
  __m512i seen = _mm512_setzero_si512();
  void lookup(const uint8_t* codes, int ch, __m512i& w0, __m512i& w1) {
    const __m512i c = _mm512_loadu_si512(codes + 64 * ch);
    const __m512i l = _mm512_permutex2var_epi8(lo0, c, lo1), h = _mm512_permutex2var_epi8(hi0, c, hi1);
    seen = _mm512_max_epu8(seen, h);
    const __m512i hs = _mm512_ternarylogic_epi32(h, c, _mm512_set1_epi8(char(0x80)), 0xF8);  // h | (c & sign)
    w0 = _mm512_unpacklo_epi8(l, hs);
    w1 = _mm512_unpackhi_epi8(l, hs);
  }
  bool nan() const { return _mm512_cmpeq_epi8_mask(seen, _mm512_set1_epi8(0x7f)) != 0; }
};
// Normal codes only (fp8_rebase_avx512.inl), two byte unpacks per 64 codes.
void rebase(const uint8_t* codes, __m512i bias, uint8_t* out) {
  const __m512i zero = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int ch = 0; ch < 8; ++ch) {
    const __m512i c = _mm512_loadu_si512(codes + 64 * ch);
    _mm512_storeu_si512(out + 128 * ch, fp8_rebase(_mm512_unpacklo_epi8(zero, c), bias));
    _mm512_storeu_si512(out + 128 * ch + 64, fp8_rebase(_mm512_unpackhi_epi8(zero, c), bias));
  }
}
// Adds `adj` to every nonzero BF16's exponent field; zeros stay zero. Returns whether a NaN
// code was seen.
bool exponent_add(const uint8_t* codes, __m512i adj, uint8_t* out) {
  Lut lut;
  const __m512i magnitude = _mm512_set1_epi16(0x7fff);
#pragma GCC unroll 8
  for (int ch = 0; ch < 8; ++ch) {
    __m512i w0, w1;
    lut.lookup(codes, ch, w0, w1);
    _mm512_storeu_si512(out + 128 * ch, _mm512_mask_add_epi16(w0, _mm512_test_epi16_mask(w0, magnitude), w0, adj));
    _mm512_storeu_si512(out + 128 * ch + 64, _mm512_mask_add_epi16(w1, _mm512_test_epi16_mask(w1, magnitude), w1, adj));
  }
  return lut.nan();
}
// Multiplies each value by its row's F32 scale (`lo` for elements 0..15 of a line, `hi` for
// 16..31) and rounds to BF16.
bool multiply(const uint8_t* codes, __m512 lo, __m512 hi, uint8_t* out) {
  Lut lut;
  const auto scaled = [&](__m512i w) {
    const __m512 f0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(w)), 16));
    const __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1)), 16));
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(f1, hi), _mm512_mul_ps(f0, lo));
  };
#pragma GCC unroll 8
  for (int ch = 0; ch < 8; ++ch) {
    __m512i w0, w1;
    lut.lookup(codes, ch, w0, w1);
    _mm512_storeu_si512(out + 128 * ch, scaled(w0));
    _mm512_storeu_si512(out + 128 * ch + 64, scaled(w1));
  }
  return lut.nan();
}

}  // namespace

void decode_fp8_tile_vbmi(const uint8_t* codes, const Fp8TileScales& s, uint8_t* out) { decode(codes, s, out); }

}  // namespace eaglet::kernels::avx512
