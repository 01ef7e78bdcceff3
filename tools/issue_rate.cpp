// How many of the dot-product instructions the AVX-512 kernels are built from one core issues per
// second: from registers with C independent accumulators (the latency, then the issue rate), and
// with the activation broadcasts the kernels' tiles use (kernels/pairs_avx512.cpp,
// kernels/matmul_ggml_avx512.cpp). The numbers their tile shapes were chosen by; a measuring
// probe, not part of the build:
//   g++ -O2 -mavx512f -mavx512bw -mavx512bf16 -mavx512vnni tools/issue_rate.cpp -o /tmp/issue_rate
//   /tmp/issue_rate        (G instructions/s; vdpbf16ps does 32 multiply-adds, vpdpbusd 64)
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

constexpr long kOps = 400'000'000;
alignas(64) int32_t g_x[64 * 16 + 16];  // broadcast sources, 16 per step
alignas(64) __m512i g_w[64 * 8];        // weight lines, NB per step (L1-resident, as the kernels' chunks are)

template <bool Int8> struct Acc { using type = __m512; };  // vdpbf16ps sums floats
template <> struct Acc<true> { using type = __m512i; };   // vpdpbusd integers

// R rows x NB weight lines: R * NB accumulators, NB loads and one broadcast per row per step. NB = 0
// means R accumulators against register operands only.
template <bool Int8, int R, int NB>
__attribute__((noinline)) float run(long steps) {
  constexpr int C = NB ? R * NB : R, W = NB ? NB : 1;
  using V = __m512i;
  using A = typename Acc<Int8>::type;
  A acc[C];
  for (int i = 0; i < C; ++i) acc[i] = (A)_mm512_set1_epi32(i);  // distinct, so no chains merge
  const V x = _mm512_set1_epi32(0x3c003c00);
  V w0 = _mm512_set1_epi32(0x3f803f80);
  for (long k = 0; k < steps; ++k) {
    const int32_t* p = g_x + (k & 63) * 16;
    V w[W];
    for (int j = 0; j < W; ++j) w[j] = NB ? _mm512_load_si512(g_w + (k & 63) * 8 + j) : w0;
#pragma GCC unroll 32
    for (int i = 0; i < (NB ? R : C); ++i) {
      const V b = NB ? _mm512_set1_epi32(p[i]) : x;
#pragma GCC unroll 8
      for (int j = 0; j < W; ++j) {
        A& a = acc[NB ? i * NB + j : i];
        if constexpr (Int8) a = _mm512_dpbusd_epi32(a, w[j], b);
        else a = _mm512_dpbf16_ps(a, (__m512bh)w[j], (__m512bh)b);
      }
    }
    asm volatile("" : "+v"(w0));  // keeps the loop from being folded
  }
  alignas(64) int32_t out[16];
  int32_t s = 0;
  for (int i = 0; i < C; ++i) {
    _mm512_store_si512(out, (V)acc[i]);
    s += out[i % 16];
  }
  return float(s);
}

template <bool Int8, int R, int NB>
void report(const char* what) {
  constexpr int C = NB ? R * NB : R;
  const long steps = kOps / C;
  const auto t0 = std::chrono::steady_clock::now();
  const float sink = run<Int8, R, NB>(steps);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-10s %-44s %5.2f G/s%s\n", Int8 ? "vpdpbusd" : "vdpbf16ps", what, steps * C / s / 1e9,
              sink == 1.5f ? " " : "");
}

}  // namespace

int main() {
  for (auto& v : g_x) v = 0x01010101;
  for (auto& v : g_w) v = _mm512_set1_epi32(0x3f803f80);
  report<false, 4, 0>("4 chains, register operands");
  report<false, 8, 0>("8 chains, register operands");
  report<false, 16, 0>("16 chains, register operands");
  report<false, 16, 1>("16 rows x 1 block: a broadcast per instruction");
  report<false, 8, 3>("8 rows x 3 blocks: a broadcast per 3");
  report<true, 4, 0>("4 chains, register operands");
  report<true, 8, 0>("8 chains, register operands");
  report<true, 16, 0>("16 chains, register operands");
  report<true, 16, 1>("16 rows x 1 group: a broadcast per instruction");
  report<true, 8, 2>("8 rows x 2 groups: a broadcast per 2");
  report<true, 4, 2>("4 rows x 2 groups: a broadcast per 2");
}
