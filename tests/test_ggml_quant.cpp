// GGUF block formats against their documented layouts: each test packs known codes the way
// ggml-common.h lays them out (written here from the layout, not from the decoder) and checks
// every decoded weight; half-precision rounding on every code and on midpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

// Q8_0 / Q4_0 matmuls: on every ISA equal to the float product of the dequantised weights and
// the dequantised activations (the block sums are exact integers), and batch invariant: a row
// computed in a batch, alone, or on three threads is bitwise the same.
TEST(GgmlQuant, BlockMatmulsMatchTheDequantisedProductAndAreBatchInvariant) {
  const int64_t K = 160, N = 61;  // 9 x 61 x 160 multiply-adds: large enough to fork
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(size_t(N * K)), x(size_t(9 * K));
  for (auto& v : wf) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  std::vector<BlockQ8_0> w8(size_t(N * K / 32));
  std::vector<BlockQ4_0> w4(size_t(N * K / 32));
  quantize_row_q8_0(wf.data(), w8.data(), N * K);
  quantize_row_q4_0(wf.data(), w4.data(), N * K);
  ThreadPool one(1), three(3);
  const Isa saved = active_isa();
  for (QuantScheme q : {QuantScheme::Q8_0, QuantScheme::Q4_0}) {
    const void* data = q == QuantScheme::Q8_0 ? static_cast<const void*>(w8.data()) : w4.data();
    std::vector<float> wd(size_t(N * K));
    dequantize_row(q == QuantScheme::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q4_0, data, wd.data(), N * K);
    WeightView view{DType::U8, data, N, K, q};
    EXPECT_EQ(view.nbytes(), size_t(N * K / 32) * (q == QuantScheme::Q8_0 ? 34u : 18u));
    for (int64_t M : {1, 4, 9}) {
      std::vector<ActBlockQ8> xq(size_t(M * K / 32));
      quantize_activations(x.data(), M, K, xq.data());
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16}) {
        if (int(isa) > int(best_supported_isa())) continue;
        set_active_isa(isa);
        std::vector<float> batched(size_t(M * N)), threaded(size_t(M * N));
        matmul(one, x.data(), M, view, batched.data());
        matmul(three, x.data(), M, view, threaded.data());
        ASSERT_EQ(batched, threaded) << isa_name(isa);
        for (int64_t m = 0; m < M; ++m) {
          std::vector<float> row(static_cast<size_t>(N));
          matmul(one, x.data() + m * K, 1, view, row.data());
          for (int64_t n = 0; n < N; ++n) {
            ASSERT_EQ(row[size_t(n)], batched[size_t(m * N + n)]) << isa_name(isa) << " row " << m;
            double want = 0, scale = 0;
            for (int64_t k = 0; k < K; ++k) {
              const ActBlockQ8& a = xq[size_t((m * K + k) / 32)];
              const double xv = double(a.d) * a.q[k % 32];
              want += double(wd[size_t(n * K + k)]) * xv;
              scale += std::fabs(double(wd[size_t(n * K + k)]) * xv);
            }
            EXPECT_NEAR(batched[size_t(m * N + n)], want, 1e-5 * scale + 1e-6) << isa_name(isa) << " " << m << "," << n;
          }
        }
      }
      set_active_isa(saved);
    }
  }
  WeightView odd{DType::U8, w8.data(), 1, 40, QuantScheme::Q8_0};
  std::vector<float> y(1);
  EXPECT_THROW(matmul(one, x.data(), 1, odd, y.data()), Error);
}

}  // namespace
}  // namespace eaglet::kernels
