// The FP8 formats of the MiniMax releases: every e4m3 and E8M0 code decodes bit-exactly (scalar
// and through every SIMD matmul), FP8 matmuls match the scalar reference, and they keep the batch
// and thread invariance speculative decoding relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using kernels::QuantScheme;

// One test per kernel ISA: an ISA this CPU lacks is reported as skipped, with the reason.
class Fp8On : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (int(GetParam()) > int(best_supported_isa()))
      GTEST_SKIP() << "this CPU has no " << isa_name(GetParam()) << " (best here: " << isa_name(best_supported_isa()) << ")";
  }
};
std::string isa_param_name(const ::testing::TestParamInfo<Isa>& i) { return isa_name(i.param); }

// The OCP e4m3fn definition, written independently of kernels/quant.cpp.
double e4m3_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

TEST(Fp8, EveryE4m3AndE8m0CodeDecodesExactly) {
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_definition(c);
    const float got = kernels::e4m3_to_f32(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_EQ(double(got), want) << "e4m3 code " << c;
      EXPECT_EQ(std::signbit(got), bool(c & 0x80)) << c;
    }
    const float s = kernels::e8m0_to_f32(uint8_t(c));
    if (c == 255) EXPECT_TRUE(std::isnan(s));
    else EXPECT_EQ(double(s), std::pow(2.0, c - 127)) << "e8m0 code " << c;
  }
}

TEST_P(Fp8On, SimdMatmulsDecodeEveryCodeExactly) {
  const Isa isa = GetParam();
  // W holds each e4m3 code once (NaN codes apart), MXFP8 scale 2^0; x = one-hot rows, so y = W^T
  // exactly: one product by 1 and additions of zeros.
  const int64_t N = 8, K = 32;
  std::vector<uint8_t> w(size_t(N * K));
  for (int c = 0; c < 256; ++c) w[size_t(c)] = (c & 0x7f) == 0x7f ? 0 : uint8_t(c);
  std::vector<uint8_t> unit_scales(size_t(N), 127);
  std::vector<float> x(size_t(K * K), 0.0f);
  for (int64_t k = 0; k < K; ++k) x[size_t(k * K + k)] = 1.0f;
  kernels::Fp8Scales mx{QuantScheme::Mxfp8, unit_scales.data(), K};
  {
    const auto& t = kernels::table_for(isa);
    std::vector<float> y(size_t(K * N));
    t.matmul_fp8(x.data(), K, K, w.data(), mx, 0, N, y.data(), N);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(y[size_t(k * N + n)], kernels::e4m3_to_f32(w[size_t(n * K + k)])) << isa_name(isa) << " code " << int(w[size_t(n * K + k)]);
    // NaN codes stay NaN.
    std::vector<uint8_t> nan_row(size_t(K), 0x7f);
    nan_row[1] = 0xff;
    float yn = 0;
    t.matmul_fp8(x.data(), 1, K, nan_row.data(), mx, 0, 1, &yn, 1);
    EXPECT_TRUE(std::isnan(yn)) << isa_name(isa);
    // Every E8M0 scale: weight 1.0 (0x38) times 2^(e - 127), subnormal results included.
    const int64_t R = 255;
    std::vector<uint8_t> ones(size_t(R * K), 0x38), exps(static_cast<size_t>(R));
    for (int64_t e = 0; e < R; ++e) exps[size_t(e)] = uint8_t(e);
    kernels::Fp8Scales sc{QuantScheme::Mxfp8, exps.data(), K};
    std::vector<float> ys(static_cast<size_t>(R));
    t.matmul_fp8(x.data(), 1, K, ones.data(), sc, 0, R, ys.data(), R);
    for (int64_t e = 0; e < R; ++e) ASSERT_EQ(double(ys[size_t(e)]), std::pow(2.0, double(e) - 127)) << isa_name(isa) << " e8m0 " << e;
  }
}

struct Fp8Matrix {
  std::vector<uint8_t> codes;
  std::vector<uint8_t> mx_scales;
  std::vector<float> block_scales;
  kernels::WeightView view(QuantScheme q, int64_t N, int64_t K) const {
    kernels::WeightView v{DType::F8_E4M3, codes.data(), N, K};
    v.quant = q;
    v.scales = q == QuantScheme::Mxfp8 ? static_cast<const void*>(mx_scales.data()) : block_scales.data();
    return v;
  }
};

Fp8Matrix random_fp8(int64_t N, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Fp8Matrix m;
  m.codes.resize(size_t(N * K));
  for (auto& c : m.codes) {
    c = uint8_t(rng() & 0xff);
    if ((c & 0x7f) == 0x7f) c = 0x30;
  }
  m.mx_scales.resize(size_t(N * K / 32));
  for (auto& s : m.mx_scales) s = uint8_t(120 + rng() % 8);
  const int64_t br = (N + 127) / 128, bc = (K + 127) / 128;
  m.block_scales.resize(size_t(br * bc));
  for (auto& s : m.block_scales) s = 0.001f + float(rng() % 1000) * 1e-5f;
  return m;
}

TEST_P(Fp8On, MatmulMatchesScalarAndIsBatchInvariant) {
  const Isa isa = GetParam();
  const auto& ref = kernels::scalar_table();
  uint64_t seed = 7;
  for (QuantScheme q : {QuantScheme::Mxfp8, QuantScheme::Fp8Block128})
    for (int64_t K : {32, 96, 160})
      for (int64_t N : {1, 5, 13, 130})
        for (int64_t M : {1, 3, 5}) {
          const Fp8Matrix w = random_fp8(N, K, seed++);
          const auto x = test::random_normal(size_t(M * K), 1.0f, seed++);
          const kernels::Fp8Scales s = w.view(q, N, K).fp8_scales();
          std::vector<float> want(size_t(M * N)), absdot(size_t(M * N));
          ref.matmul_fp8(x.data(), M, K, w.codes.data(), s, 0, N, want.data(), N);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n)
              for (int64_t k = 0; k < K; ++k)
                absdot[size_t(m * N + n)] += std::fabs(x[size_t(m * K + k)] * kernels::e4m3_to_f32(w.codes[size_t(n * K + k)]) * s.scale(n, k));
          {
            const auto& t = kernels::table_for(isa);
            std::vector<float> got(size_t(M * N));
            t.matmul_fp8(x.data(), M, K, w.codes.data(), s, 0, N, got.data(), N);
            for (size_t i = 0; i < got.size(); ++i)
              ASSERT_LE(std::fabs(got[i] - want[i]), 1e-5f * (absdot[i] + 1e-6f)) << isa_name(isa) << " M=" << M << " N=" << N << " K=" << K;
            for (int64_t m = 0; m < M; ++m) {
              std::vector<float> row(static_cast<size_t>(N));
              t.matmul_fp8(x.data() + m * K, 1, K, w.codes.data(), s, 0, N, row.data(), N);
              for (int64_t n = 0; n < N; ++n) ASSERT_EQ(row[size_t(n)], got[size_t(m * N + n)]) << isa_name(isa);
            }
          }
        }
}

TEST_P(Fp8On, OneNanCodeSpoilsOnlyItsRowAndAnyRowRangeGivesTheSameBits) {
  const Isa isa = GetParam();
  // The AVX2 kernel notices NaN codes per block of rows and recomputes that block exactly: the row
  // with the NaN code must come out NaN, its neighbours bit for bit as without it, and a split of
  // the rows (as threads split them) must not change any output.
  const int64_t N = 130, K = 96, M = 6;
  Fp8Matrix w = random_fp8(N, K, 99);
  const auto x = test::random_normal(size_t(M * K), 1.0f, 100);
  {
    const auto& t = kernels::table_for(isa);
    for (QuantScheme q : {QuantScheme::Mxfp8, QuantScheme::Fp8Block128}) {
      const kernels::Fp8Scales s = w.view(q, N, K).fp8_scales();
      std::vector<float> clean(size_t(M * N)), split(size_t(M * N)), spoilt(size_t(M * N));
      t.matmul_fp8(x.data(), M, K, w.codes.data(), s, 0, N, clean.data(), N);
      for (int64_t n0 : {0, 37, 64, 101}) {
        const int64_t n1 = std::min<int64_t>(N, n0 + 37);
        t.matmul_fp8(x.data(), M, K, w.codes.data(), s, n0, n1, split.data(), N);
      }
      EXPECT_EQ(split, clean) << isa_name(isa);
      Fp8Matrix bad = w;
      bad.codes[size_t(70 * K + 50)] = 0xff;
      const kernels::Fp8Scales sb = bad.view(q, N, K).fp8_scales();
      t.matmul_fp8(x.data(), M, K, bad.codes.data(), sb, 0, N, spoilt.data(), N);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const float got = spoilt[size_t(m * N + n)];
          if (n == 70) EXPECT_TRUE(std::isnan(got)) << isa_name(isa) << " m=" << m;
          else ASSERT_EQ(got, clean[size_t(m * N + n)]) << isa_name(isa) << " m=" << m << " n=" << n;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Fp8On, ::testing::Values(Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16, Isa::Amx),
                         isa_param_name);

TEST(Fp8, GroupedMatmulEqualsSeparateMatmuls) {
  // Experts of different sizes, some with no tokens, through every weight dtype.
  const int64_t K = 64;
  const Fp8Matrix a = random_fp8(40, K, 1), b = random_fp8(17, K, 2);
  const auto wf = test::random_normal(size_t(23 * K), 0.1f, 3);
  std::vector<kernels::WeightView> views = {a.view(QuantScheme::Mxfp8, 40, K), b.view(QuantScheme::Fp8Block128, 17, K),
                                            kernels::WeightView{DType::F32, wf.data(), 23, K}};
  const std::vector<int64_t> Ms = {3, 0, 2};
  const auto x = test::random_normal(size_t(5 * K), 1.0f, 4);
  std::vector<std::vector<float>> grouped(3), separate(3);
  std::vector<kernels::MatmulJob> jobs;
  ThreadPool one(1), three(3);
  for (size_t j = 0; j < 3; ++j) {
    grouped[j].assign(size_t(Ms[j] * views[j].rows), -1.0f);
    separate[j].assign(size_t(Ms[j] * views[j].rows), -2.0f);
    jobs.push_back({x.data(), Ms[j], &views[j], grouped[j].data()});
    if (Ms[j]) kernels::matmul(one, x.data(), Ms[j], views[j], separate[j].data());
  }
  kernels::matmul_grouped(three, jobs.data(), jobs.size());
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(grouped[j], separate[j]) << "job " << j;
}

}  // namespace
}  // namespace eaglet
