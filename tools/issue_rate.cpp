// How many of the dot-product instructions the AVX-512 kernels are built from one core issues per
// second: from registers with C independent accumulators (the latency, then the issue rate), and
// with the activation broadcasts the kernels' tiles use (kernels/pairs_avx512.cpp,
// kernels/matmul_ggml_avx512.cpp). The numbers their tile shapes were chosen by; a measuring
// probe, not part of the build:
//   g++ -O2 -mavx512f -mavx512bw -mavx512bf16 -mavx512vnni tools/issue_rate.cpp -o /tmp/issue_rate
//   /tmp/issue_rate        (G instructions/s; vdpbf16ps does 32 multiply-adds, vpdpbusd 64)
// The C++ broadcast rows understate a core: GCC 12 rotates the accumulators through a register
// move each per step (16 moves per 8 vpdpbusd at 4 x 2), and Zen 5 issues those too. The "asm"
// rows are the same tiles written out (one load per weight line, one vpbroadcastd per row, no
// moves); on a 2-core AMD EPYC Zen 5 VM, in two runs, they issue 6.3-6.4 (4 x 2), 7.2 (4 x 3),
// 7.3-7.8 (8 x 2) and 5.6-6.4 (16 x 1) G vpdpbusd/s, 5.0-5.9 with the broadcast folded into
// vpdpbusd ({1to16}), while the C++ rows of the same run gave 4.0-5.3.
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

// Times `loop(steps)` over kOps instructions, `per_step` a step, and prints the rate.
template <class Loop>
void measure(const char* insn, const char* what, int per_step, Loop loop) {
  const long steps = kOps / per_step;
  const auto t0 = std::chrono::steady_clock::now();
  loop(steps);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-10s %-44s %5.2f G/s\n", insn, what, steps * per_step / s / 1e9);
}

template <bool Int8, int R, int NB>
void report(const char* what) {
  volatile float sink = 0;  // keeps the sums, so the loop is not dropped
  measure(Int8 ? "vpdpbusd" : "vdpbf16ps", what, NB ? R * NB : R, [&](long steps) { sink = run<Int8, R, NB>(steps); });
}

// The vpdpbusd tiles in assembly: weight lines in zmm24.., broadcasts in zmm30/31, sums in zmm0...
#define LD(reg, off) "vmovdqa64 " #off "(%[w]), %%zmm" #reg "\n\t"
#define BC(reg, off) "vpbroadcastd " #off "(%[x]), %%zmm" #reg "\n\t"
#define DP(acc, w, b) "vpdpbusd %%zmm" #b ", %%zmm" #w ", %%zmm" #acc "\n\t"
#define DPM(acc, w, off) "vpdpbusd " #off "(%[x])%{1to16%}, %%zmm" #w ", %%zmm" #acc "\n\t"
#define ALL_ZMM                                                                                        \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15", "xmm24", "xmm25", "xmm26", "xmm30", "xmm31"
#define ASM_TILE(name, body)                                                               \
  __attribute__((noinline)) void name(long steps) {                                        \
    for (long k = 0; k < steps; ++k) {                                                     \
      const void* w = g_w + (k & 63) * 8;                                                  \
      const void* x = g_x + (k & 63) * 16;                                                 \
      asm volatile(body ::[w] "r"(w), [x] "r"(x) : "memory", ALL_ZMM);                     \
    }                                                                                      \
  }
ASM_TILE(asm_4x2, LD(24, 0) LD(25, 64) BC(30, 0) DP(0, 24, 30) DP(1, 25, 30) BC(31, 4) DP(2, 24, 31) DP(3, 25, 31)
                      BC(30, 8) DP(4, 24, 30) DP(5, 25, 30) BC(31, 12) DP(6, 24, 31) DP(7, 25, 31))
ASM_TILE(asm_4x3, LD(24, 0) LD(25, 64) LD(26, 128) BC(30, 0) DP(0, 24, 30) DP(1, 25, 30) DP(2, 26, 30) BC(31, 4)
                      DP(3, 24, 31) DP(4, 25, 31) DP(5, 26, 31) BC(30, 8) DP(6, 24, 30) DP(7, 25, 30) DP(8, 26, 30)
                          BC(31, 12) DP(9, 24, 31) DP(10, 25, 31) DP(11, 26, 31))
ASM_TILE(asm_8x2, LD(24, 0) LD(25, 64) BC(30, 0) DP(0, 24, 30) DP(1, 25, 30) BC(31, 4) DP(2, 24, 31) DP(3, 25, 31)
                      BC(30, 8) DP(4, 24, 30) DP(5, 25, 30) BC(31, 12) DP(6, 24, 31) DP(7, 25, 31) BC(30, 16)
                          DP(8, 24, 30) DP(9, 25, 30) BC(31, 20) DP(10, 24, 31) DP(11, 25, 31) BC(30, 24)
                              DP(12, 24, 30) DP(13, 25, 30) BC(31, 28) DP(14, 24, 31) DP(15, 25, 31))
ASM_TILE(asm_16x1, LD(24, 0) BC(30, 0) DP(0, 24, 30) BC(31, 4) DP(1, 24, 31) BC(30, 8) DP(2, 24, 30) BC(31, 12)
                       DP(3, 24, 31) BC(30, 16) DP(4, 24, 30) BC(31, 20) DP(5, 24, 31) BC(30, 24) DP(6, 24, 30)
                           BC(31, 28) DP(7, 24, 31) BC(30, 32) DP(8, 24, 30) BC(31, 36) DP(9, 24, 31) BC(30, 40)
                               DP(10, 24, 30) BC(31, 44) DP(11, 24, 31) BC(30, 48) DP(12, 24, 30) BC(31, 52)
                                   DP(13, 24, 31) BC(30, 56) DP(14, 24, 30) BC(31, 60) DP(15, 24, 31))
ASM_TILE(asm_4x3_folded, LD(24, 0) LD(25, 64) LD(26, 128) DPM(0, 24, 0) DPM(1, 25, 0) DPM(2, 26, 0) DPM(3, 24, 4)
                             DPM(4, 25, 4) DPM(5, 26, 4) DPM(6, 24, 8) DPM(7, 25, 8) DPM(8, 26, 8) DPM(9, 24, 12)
                                 DPM(10, 25, 12) DPM(11, 26, 12))

void report_asm(void (*tile)(long), int per_step, const char* what) { measure("vpdpbusd", what, per_step, tile); }

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
  report_asm(asm_4x2, 8, "asm 4 x 2: a broadcast per 2");
  report_asm(asm_4x3, 12, "asm 4 x 3: a broadcast per 3");
  report_asm(asm_8x2, 16, "asm 8 x 2: a broadcast per 2");
  report_asm(asm_16x1, 16, "asm 16 x 1: a broadcast per instruction");
  report_asm(asm_4x3_folded, 12, "asm 4 x 3, broadcasts folded ({1to16})");
}
