// AVX-512 matmuls: F32 weights, BF16 weights widened to F32, and (with AVX512_BF16) BF16 x BF16
// dot products via vdpbf16ps, which halve the instruction count of prefill.
#include <immintrin.h>

#include "kernels/isa_table.h"
#include "kernels/simd_fp8_matmul.inl"
#include "kernels/simd_matmul.inl"

#ifndef EAGLET_DECODE_NR
#define EAGLET_DECODE_NR 8
#endif

namespace eaglet::kernels {
namespace avx512 {

inline __mmask16 mask16(int n) { return __mmask16((1u << n) - 1); }

inline __m512 widen_bf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

struct F32Engine {
  using Acc = __m512;
  using W = __m512;
  static constexpr int kStep = 16, kMR = 4, kNR = 4, kDecodeNR = EAGLET_DECODE_NR;
  static Acc zero() { return _mm512_setzero_ps(); }
  static __m512 load_x(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_x_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask16(n), p); }
  static W load_w(const float* p) { return _mm512_loadu_ps(p); }
  static W load_w_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask16(n), p); }
  static W load_w(const bf16_t* p) { return widen_bf16(_mm256_loadu_si256((const __m256i*)p)); }
  static W load_w_n(const bf16_t* p, int n) { return widen_bf16(_mm256_maskz_loadu_epi16(mask16(n), p)); }
  static Acc madd(Acc a, __m512 x, W w) { return _mm512_fmadd_ps(x, w, a); }
  static float reduce(Acc a) { return _mm512_reduce_add_ps(a); }
};

void matmul_f32(const float* x, int64_t M, int64_t K, const float* w, int64_t n0, int64_t n1,
                float* y, int64_t ldy) {
  simd::matmul<F32Engine>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_bf16(const float* x, int64_t M, int64_t K, const bf16_t* w, int64_t n0, int64_t n1,
                 float* y, int64_t ldy) {
  simd::matmul<F32Engine>(x, M, K, w, n0, n1, y, ldy);
}

struct Bf16DotEngine {
  using Acc = __m512;
  using W = __m512bh;
  static constexpr int kStep = 32, kMR = 4, kNR = 4, kDecodeNR = EAGLET_DECODE_NR;
  static __mmask32 mask32(int n) { return n >= 32 ? ~__mmask32(0) : __mmask32((1u << n) - 1); }
  static Acc zero() { return _mm512_setzero_ps(); }
  static __m512bh load_x(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static __m512bh load_x_n(const bf16_t* p, int n) { return (__m512bh)_mm512_maskz_loadu_epi16(mask32(n), p); }
  static W load_w(const bf16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static W load_w_n(const bf16_t* p, int n) { return (__m512bh)_mm512_maskz_loadu_epi16(mask32(n), p); }
  static Acc madd(Acc a, __m512bh x, W w) { return _mm512_dpbf16_ps(a, x, w); }
  static float reduce(Acc a) { return _mm512_reduce_add_ps(a); }
};

void matmul_bf16_bf16(const bf16_t* x, int64_t M, int64_t K, const bf16_t* w, int64_t n0,
                      int64_t n1, float* y, int64_t ldy) {
  simd::matmul<Bf16DotEngine>(x, M, K, w, n0, n1, y, ldy);
}

// 16 e4m3 bytes -> F16 bit patterns (value / 256) -> F32 times the scale.
struct Fp8Engine {
  using Acc = __m512;
  static constexpr int kStep = 16, kMR = 4;
  static Acc zero() { return _mm512_setzero_ps(); }
  static __m512 load_x(const float* p) { return _mm512_loadu_ps(p); }
  // F16 bits of e4m3 / 256: sign-extending puts the sign at bit 15 after the shift (and a copy
  // at bit 14, masked off). NaN codes come out as 480 / 256; decode_exact() fixes them.
  static __m256i f16_bits(const uint8_t* p) {
    const __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)p));
    return _mm256_and_si256(_mm256_slli_epi16(b, 7), _mm256_set1_epi16(int16_t(0xbf80)));
  }
  static __m512 decode(const uint8_t* p, float scale256) {
    return _mm512_mul_ps(_mm512_cvtph_ps(f16_bits(p)), _mm512_set1_ps(scale256));
  }
  // Whether a group of kMxGroup codes holds a NaN code (S.1111.111), which decode() misses.
  static bool group_has_nan(const uint8_t* p) {
    const __m256i b = _mm256_and_si256(_mm256_loadu_si256((const __m256i*)p), _mm256_set1_epi8(0x7f));
    return _mm256_cmpeq_epi8_mask(b, _mm256_set1_epi8(0x7f)) != 0;
  }
  static __m512 decode_exact(const uint8_t* p, float scale256) {
    const __m256i mag = _mm256_set1_epi16(0x3f80);
    __m256i h = f16_bits(p);
    const __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, mag), mag);
    h = _mm256_mask_mov_epi16(h, nan, _mm256_or_si256(h, _mm256_set1_epi16(0x7e00)));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(scale256));
  }
  static __m512 decode_huge(const uint8_t* p, float scale) {
    return _mm512_mul_ps(decode_exact(p, 256.0f), _mm512_set1_ps(scale));
  }
  static Acc madd(Acc a, __m512 x, __m512 w) { return _mm512_fmadd_ps(x, w, a); }
  static float reduce(Acc a) { return _mm512_reduce_add_ps(a); }
};

void matmul_fp8(const float* x, int64_t M, int64_t K, const uint8_t* w, const Fp8Scales& s,
                int64_t n0, int64_t n1, float* y, int64_t ldy) {
  simd::matmul_fp8<Fp8Engine>(x, M, K, w, s, n0, n1, y, ldy);
}

float dot(const float*, const float*, int64_t);
void axpy(float, const float*, float*, int64_t);
void rmsnorm(const float*, const float*, float, float*, int64_t);
void dot_rows(const float*, const float*, int64_t, int64_t, int64_t, float, float*);
void axpy_rows(const float*, const float*, int64_t, int64_t, int64_t, float*);
void silu_mul(const float*, const float*, float*, int64_t);
void softmax(float*, int64_t);
void to_bf16(const float*, int64_t, bf16_t*);
void matmul_bf16_pairs(const bf16_t*, int64_t, int64_t, const void*, int64_t, int64_t, float*, int64_t);  // pairs_avx512.cpp
void matmul_fp8_pairs(const bf16_t*, int64_t, int64_t, const void*, const Fp8Scales&, int64_t, int64_t, float*, int64_t);

}  // namespace avx512

const IsaTable& avx512_table() {
  static const IsaTable t = [] {  // Q4_K / Q6_K stay AVX2's; Q8_0 / Q4_0 AVX2's where there is no VNNI
    IsaTable t = avx2_table();
    if (cpu_features().avx512_vnni) {
      t.q8_0 = {vnni::matmul_q8_0, Layout::Rows16, "avx512-vnni"};
      t.q4_0 = {vnni::matmul_q4_0, Layout::Rows16, "avx512-vnni"};
    }
    t.isa = Isa::Avx512;
    t.name = "avx512";
    t.matmul_f32 = avx512::matmul_f32;
    t.matmul_bf16 = avx512::matmul_bf16;
    t.dot = avx512::dot;
    t.axpy = avx512::axpy;
    t.rmsnorm = avx512::rmsnorm;
    t.matmul_fp8 = avx512::matmul_fp8;
    t.dot_rows = avx512::dot_rows;
    t.axpy_rows = avx512::axpy_rows;
    t.silu_mul = avx512::silu_mul;
    t.softmax = avx512::softmax;
    t.to_bf16 = avx512::to_bf16;
    return t;
  }();
  return t;
}

const IsaTable& avx512bf16_table() {
  static const IsaTable t = [] {
    IsaTable t = avx512_table();
    t.isa = Isa::Avx512Bf16;
    t.name = "avx512bf16";
    t.matmul_bf16_bf16 = avx512::matmul_bf16_bf16;
    t.bf16_layout = Layout::Bf16Pairs16;  // the AMX tiles' layout, read by vdpbf16ps
    t.matmul_bf16_pairs = avx512::matmul_bf16_pairs;
    if (cpu_features().avx512_vbmi) {  // FP8 decoded to those pairs (Cooper Lake lacks VBMI)
      t.fp8_layout = Layout::Fp8Pairs16;
      t.matmul_fp8_pairs = avx512::matmul_fp8_pairs;
    }
    return t;
  }();
  return t;
}

}  // namespace eaglet::kernels
