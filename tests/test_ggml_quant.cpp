// GGUF block formats against their documented layouts: each test packs known codes the way
// ggml-common.h lays them out (written here from the layout, not from the decoder) and checks
// every decoded weight; half-precision rounding on every code and on midpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <numeric>
#include <random>
#include <tuple>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"

namespace eaglet::kernels {
namespace {

TEST(GgmlQuant, HalfPrecisionRoundTripsEveryCodeAndRoundsMidpointsToEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(f16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << "half " << h;
  }
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);       // midpoint, even neighbour below
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);       // midpoint, even neighbour above
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                 // rounds to infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);    // half the smallest subnormal: even
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1023.5f, -24)), 0x8400);  // subnormal rounding up into normal
}

TEST(GgmlQuant, TypeTableMatchesTheBlockStructs) {
  EXPECT_EQ(ggml_type_info(8)->block_bytes, sizeof(BlockQ8_0));
  EXPECT_EQ(ggml_type_info(2)->block_bytes, sizeof(BlockQ4_0));
  EXPECT_EQ(ggml_type_info(12)->block_bytes, sizeof(BlockQ4_K));
  EXPECT_EQ(ggml_type_info(14)->block_bytes, sizeof(BlockQ6_K));
  EXPECT_STREQ(ggml_type_info(30)->name, "BF16");
  EXPECT_FALSE(ggml_type_info(3)->supported);  // Q4_1: known, named, not decoded
  EXPECT_EQ(ggml_type_info(4), nullptr);       // ids ggml retired
  EXPECT_EQ(ggml_type_info(999), nullptr);
  std::vector<float> out(32);
  EXPECT_THROW(dequantize_row(GgmlType(3), nullptr, out.data(), 32), Error);
  EXPECT_THROW(dequantize_row(GgmlType::Q8_0, nullptr, out.data(), 33), Error);
}

TEST(GgmlQuant, Q8_0AndQ4_0) {
  BlockQ8_0 b8{};
  b8.d = f32_to_f16(0.5f);
  for (int j = 0; j < 32; ++j) b8.q[j] = int8_t(j * 8 - 128);
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q8_0, &b8, y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[size_t(j)], 0.5f * float(j * 8 - 128)) << j;

  BlockQ4_0 b4{};
  b4.d = f32_to_f16(-1.5f);
  int code[32];
  for (int j = 0; j < 32; ++j) code[j] = (j * 7 + 3) % 16;
  for (int j = 0; j < 16; ++j) b4.q[j] = uint8_t(code[j] | (code[j + 16] << 4));  // weight j low, j + 16 high
  dequantize_row(GgmlType::Q4_0, &b4, y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[size_t(j)], -1.5f * float(code[j] - 8)) << j;
}

TEST(GgmlQuant, Q4_KSixBitScalesAndMinsOfAllEightSubBlocks) {
  std::mt19937 rng(5);
  BlockQ4_K b{};
  b.d = f32_to_f16(0.25f);
  b.dmin = f32_to_f16(0.125f);
  int sc[8], mn[8], q[256];
  for (int s = 0; s < 8; ++s) {
    sc[s] = int(rng() % 64);
    mn[s] = int(rng() % 64);
  }
  sc[7] = 63;  // top bits set: they live in bytes 0..7's spare bits
  mn[4] = 63;
  // Packing: sub-blocks 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins);
  // sub-blocks 4..7: low 4 bits in bytes 8..11 (scale low nibble, min high nibble), top 2 bits
  // in bits 6..7 of bytes 0..3 (scales) and 4..7 (mins).
  for (int s = 0; s < 4; ++s) {
    b.scales[s] = uint8_t(sc[s] | ((sc[s + 4] >> 4) << 6));
    b.scales[s + 4] = uint8_t(mn[s] | ((mn[s + 4] >> 4) << 6));
    b.scales[s + 8] = uint8_t((sc[s + 4] & 0xF) | ((mn[s + 4] & 0xF) << 4));
  }
  for (int i = 0; i < 256; ++i) q[i] = int(rng() % 16);
  // Each 64 weights: 32 bytes, the first 32 weights in the low nibbles, the next 32 high.
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b.q[c * 32 + l] = uint8_t(q[c * 64 + l] | (q[c * 64 + 32 + l] << 4));
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q4_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[size_t(i)], 0.25f * float(sc[s]) * float(q[i]) - 0.125f * float(mn[s])) << i;
  }
}

TEST(GgmlQuant, Q6_KLowAndHighBitsAndSignedScales) {
  std::mt19937 rng(9);
  BlockQ6_K b{};
  b.d = f32_to_f16(0.0625f);
  int q[256];
  for (int i = 0; i < 256; ++i) q[i] = int(rng() % 64);
  q[0] = 0;
  q[255] = 63;
  for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(int(rng() % 256) - 128);
  b.scales[15] = -128;
  // Each half of 128 weights, r = 0..3 quarter, l = 0..31: low nibble of ql[l + 32 * (r & 1)]
  // for r < 2 (high nibble for r >= 2), high 2 bits at bits 2r of qh[l].
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < 4; ++r)
      for (int l = 0; l < 32; ++l) {
        const int v = q[h * 128 + r * 32 + l];
        uint8_t& lo = b.ql[h * 64 + l + 32 * (r & 1)];
        lo = uint8_t(lo | ((v & 0xF) << (r >= 2 ? 4 : 0)));
        b.qh[h * 32 + l] = uint8_t(b.qh[h * 32 + l] | ((v >> 4) << (2 * r)));
      }
  std::vector<float> y(256);
  dequantize_row(GgmlType::Q6_K, &b, y.data(), 256);
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(y[size_t(i)], 0.0625f * float(b.scales[i / 16]) * float(q[i] - 32)) << i;
}

// Within half a step, except Q4_0's codes past +7 (its extreme value maps to -8, so the other
// side can reach +8 and is clamped): within one step there.
TEST(GgmlQuant, RoundToNearestQuantisersStayWithinHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(256), y(256);
  for (auto& v : x) v = nd(rng);
  x[0] = 0;
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block stays zero
  std::vector<BlockQ8_0> q8(8);
  quantize_row_q8_0(x.data(), q8.data(), 256);
  dequantize_row(GgmlType::Q8_0, q8.data(), y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const float d = f16_to_f32(q8[size_t(i / 32)].d);
    EXPECT_LE(std::fabs(y[size_t(i)] - x[size_t(i)]), 0.5f * d * 1.01f + 1e-6f) << i;
  }
  std::vector<BlockQ4_0> q4(8);
  quantize_row_q4_0(x.data(), q4.data(), 256);
  dequantize_row(GgmlType::Q4_0, q4.data(), y.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const float d = f16_to_f32(q4[size_t(i / 32)].d);
    const bool clamped = d != 0 && x[size_t(i)] / d > 7.5f;
    EXPECT_LE(std::fabs(y[size_t(i)] - x[size_t(i)]), (clamped ? 1.0f : 0.5f) * std::fabs(d) * 1.01f + 1e-6f) << i;
  }
  for (int i = 32; i < 64; ++i) EXPECT_EQ(y[size_t(i)], 0.0f);
}

// Q4_K by round to nearest: every weight within half its sub-block's step plus what rounding the
// step and min to 6 bits can add (at most 15 half-steps of d, and half of dmin); an all-zero
// sub-block stays zero; and on Gaussian weights the error is no worse than Q4_0's at the same
// 4.5 bits per weight (it measures ~10% lower here).
TEST(GgmlQuant, Q4_KRoundToNearestStaysWithinItsSteps) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 256 * 16;
  std::vector<float> x(static_cast<size_t>(n)), y(x.size()), y4(x.size());
  for (auto& v : x) v = nd(rng);
  for (int i = 0; i < 32; ++i) x[size_t(32 + i)] = 0.0f;  // zero sub-block among others
  for (int i = 0; i < 256; ++i) x[size_t(256 + i)] = 2.0f + 0.01f * float(i % 7);  // all positive: min 0
  std::vector<BlockQ4_K> qk(size_t(n / 256));
  quantize_row_q4_k(x.data(), qk.data(), n);
  dequantize_row(GgmlType::Q4_K, qk.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const BlockQ4_K& b = qk[size_t(i / 256)];
    uint8_t sc, mn;
    q4k_scale_min(b.scales, int(i % 256 / 32), &sc, &mn);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    const float bound = 0.5f * d * float(sc) + 7.5f * d + 0.5f * dmin;
    EXPECT_LE(std::fabs(y[size_t(i)] - x[size_t(i)]), bound * 1.01f + 1e-6f) << i;
  }
  for (int i = 32; i < 64; ++i) EXPECT_EQ(y[size_t(i)], 0.0f);
  std::vector<BlockQ4_0> q4(size_t(n / 32));
  quantize_row_q4_0(x.data(), q4.data(), n);
  dequantize_row(GgmlType::Q4_0, q4.data(), y4.data(), n);
  double ek = 0, e4 = 0;
  for (int64_t i = 0; i < n; ++i) {
    ek += std::pow(double(y[size_t(i)] - x[size_t(i)]), 2);
    e4 += std::pow(double(y4[size_t(i)] - x[size_t(i)]), 2);
  }
  EXPECT_LT(ek, e4) << "Q4_K squared error " << ek << " against Q4_0's " << e4;
  EXPECT_THROW(quantize_row_q4_k(x.data(), qk.data(), 300), Error);
}

}  // namespace
}  // namespace eaglet::kernels
