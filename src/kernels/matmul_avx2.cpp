// AVX2 + FMA matmuls: F32 weights and BF16 weights widened to F32; the ISA table.
#include <immintrin.h>

#include <cstring>

#include "kernels/isa_table.h"
#include "kernels/simd_matmul.inl"

namespace eaglet::kernels {
namespace avx2 {

inline __m256 widen_bf16(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

struct F32Engine {
  using Acc = __m256;
  using W = __m256;
  // 16 ymm registers: 4x3 accumulators + 3 weights + x. Four rows per weight load halve the BF16
  // widening per multiply-add against 2x4 (76 -> ... GFLOP/s at 4 rows on 2 Zen cores).
  static constexpr int kStep = 8, kMR = 4, kNR = 3, kDecodeNR = 4;
  static Acc zero() { return _mm256_setzero_ps(); }
  static __m256 load_x(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load_x_n(const float* p, int n) {
    float tmp[8] = {0};
    std::memcpy(tmp, p, size_t(n) * 4);
    return _mm256_loadu_ps(tmp);
  }
  static W load_w(const float* p) { return _mm256_loadu_ps(p); }
  static W load_w_n(const float* p, int n) { return load_x_n(p, n); }
  static W load_w(const bf16_t* p) { return widen_bf16(_mm_loadu_si128((const __m128i*)p)); }
  static W load_w_n(const bf16_t* p, int n) {
    bf16_t tmp[8] = {0};
    std::memcpy(tmp, p, size_t(n) * 2);
    return load_w(tmp);
  }
  static Acc madd(Acc a, __m256 x, W w) { return _mm256_fmadd_ps(x, w, a); }
  static float reduce(Acc a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

void matmul_f32(const float* x, int64_t M, int64_t K, const float* w, int64_t n0, int64_t n1,
                float* y, int64_t ldy) {
  simd::matmul<F32Engine>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_bf16(const float* x, int64_t M, int64_t K, const bf16_t* w, int64_t n0, int64_t n1,
                 float* y, int64_t ldy) {
  simd::matmul<F32Engine>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_fp8(const float*, int64_t, int64_t, const uint8_t*, const Fp8Scales&, int64_t, int64_t, float*,
                int64_t);  // matmul_fp8_avx2.cpp
float dot(const float*, const float*, int64_t);
void axpy(float, const float*, float*, int64_t);
void rmsnorm(const float*, const float*, float, float*, int64_t);
void dot_rows(const float*, const float*, int64_t, int64_t, int64_t, float, float*);
void axpy_rows(const float*, const float*, int64_t, int64_t, int64_t, float*);
void silu_mul(const float*, const float*, float*, int64_t);
void softmax(float*, int64_t);
void to_bf16(const float*, int64_t, bf16_t*);

}  // namespace avx2

const IsaTable& avx2_table() {
  static const IsaTable t = [] {
    IsaTable t = scalar_table();
    t.isa = Isa::Avx2;
    t.name = "avx2";
    t.matmul_f32 = avx2::matmul_f32;
    t.matmul_bf16 = avx2::matmul_bf16;
    t.matmul_bf16_bf16 = nullptr;  // no BF16 dot products: BF16 weights are widened to F32
    t.dot = avx2::dot;
    t.axpy = avx2::axpy;
    t.rmsnorm = avx2::rmsnorm;
    t.matmul_fp8 = avx2::matmul_fp8;
    t.dot_rows = avx2::dot_rows;
    t.axpy_rows = avx2::axpy_rows;
    t.silu_mul = avx2::silu_mul;
    t.softmax = avx2::softmax;
    t.to_bf16 = avx2::to_bf16;
    t.q8_0 = {avx2::matmul_q8_0, Layout::Rows8, "avx2"};
    t.q4_0 = {avx2::matmul_q4_0, Layout::Rows8, "avx2"};
    t.q4_k = {avx2::matmul_q4_k, Layout::Rows8, "avx2"};
    t.q6_k = {avx2::matmul_q6_k, Layout::Rows8, "avx2"};
    t.quantize_act = avx2::quantize_activations;
    return t;
  }();
  return t;
}

}  // namespace eaglet::kernels
