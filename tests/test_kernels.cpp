// Every SIMD path against the scalar reference on odd shapes, plus the batch-invariance property
// speculative decoding relies on (ops.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using kernels::IsaTable;

// One test per kernel ISA: an ISA this CPU lacks is reported as skipped, with the reason.
class KernelsOn : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (int(GetParam()) > int(best_supported_isa()))
      GTEST_SKIP() << "this CPU has no " << isa_name(GetParam()) << " (best here: " << isa_name(best_supported_isa()) << ")";
    saved_ = active_isa();
    set_active_isa(GetParam());
  }
  void TearDown() override { set_active_isa(saved_); }
  Isa saved_ = Isa::Scalar;
};
std::string isa_param_name(const ::testing::TestParamInfo<Isa>& i) { return isa_name(i.param); }
}  // namespace
void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }  // found by ADL: Isa is eaglet's
namespace {

std::vector<bf16_t> to_bf16(const std::vector<float>& v) {
  std::vector<bf16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = f32_to_bf16(v[i]);
  return o;
}

// |a - b| <= tol * (sum of |x_k w_k|), the natural scale of a dot product's rounding error.
void expect_close_dots(const std::vector<float>& got, const std::vector<float>& want,
                       const std::vector<float>& scale, float tol, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), tol * (scale[i] + 1e-6f)) << what << " element " << i;
}

std::vector<float> abs_dot_scale(const std::vector<float>& x, const std::vector<float>& w, int64_t M, int64_t N, int64_t K) {
  std::vector<float> s(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double a = 0;
      for (int64_t k = 0; k < K; ++k) a += std::fabs(double(x[size_t(m * K + k)]) * w[size_t(n * K + k)]);
      s[size_t(m * N + n)] = float(a);
    }
  return s;
}

class KernelsSimd : public KernelsOn {};  // the SIMD paths, each against the scalar reference

TEST_P(KernelsSimd, MatmulMatchesScalarOnOddShapes) {
  const IsaTable& ref = kernels::scalar_table();
  const Isa isa = GetParam();
  uint64_t seed = 1;
  for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 9})
    for (int64_t K : {1, 7, 17, 33, 67, 130})
      for (int64_t N : {1, 3, 5, 13, 37}) {
        auto x = test::random_normal(size_t(M * K), 1.0f, seed++);
        auto w = test::random_normal(size_t(N * K), 1.0f, seed++);
        auto wb = to_bf16(w);
        std::vector<float> wbf(w.size());
        for (size_t i = 0; i < w.size(); ++i) wbf[i] = bf16_to_f32(wb[i]);
        auto xb = to_bf16(x);
        const auto scale = abs_dot_scale(x, w, M, N, K);
        std::vector<float> want_f32(size_t(M * N)), want_bf16(size_t(M * N)), want_bb(size_t(M * N));
        ref.matmul_f32(x.data(), M, K, w.data(), 0, N, want_f32.data(), N);
        ref.matmul_bf16(x.data(), M, K, wb.data(), 0, N, want_bf16.data(), N);
        ref.matmul_bf16_bf16(xb.data(), M, K, wb.data(), 0, N, want_bb.data(), N);
        {
          const IsaTable& t = kernels::table_for(isa);
          const std::string tag = std::string(isa_name(isa)) + " M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
          std::vector<float> got(size_t(M * N));
          t.matmul_f32(x.data(), M, K, w.data(), 0, N, got.data(), N);
          expect_close_dots(got, want_f32, scale, 1e-5f, "f32 " + tag);
          t.matmul_bf16(x.data(), M, K, wb.data(), 0, N, got.data(), N);
          expect_close_dots(got, want_bf16, scale, 1e-5f, "bf16 " + tag);
          if (t.matmul_bf16_bf16) {
            t.matmul_bf16_bf16(xb.data(), M, K, wb.data(), 0, N, got.data(), N);
            expect_close_dots(got, want_bb, scale, 1e-5f, "bf16xbf16 " + tag);
          }
          // A sub-range of output columns only writes those columns.
          if (N >= 5) {
            std::vector<float> part(size_t(M * N), -7.0f);
            t.matmul_f32(x.data(), M, K, w.data(), 1, N - 1, part.data(), N);
            for (int64_t m = 0; m < M; ++m) {
              EXPECT_EQ(part[size_t(m * N)], -7.0f);
              EXPECT_EQ(part[size_t(m * N + N - 1)], -7.0f);
            }
          }
        }
      }
}

TEST_P(KernelsSimd, VectorOpsMatchScalar) {
  const IsaTable& ref = kernels::scalar_table();
  const Isa isa = GetParam();
  for (int64_t n : {1, 5, 8, 15, 16, 17, 63, 100}) {
    auto a = test::random_normal(size_t(n), 1.0f, uint64_t(n));
    auto b = test::random_normal(size_t(n), 1.0f, uint64_t(n) + 99);
    auto w = test::random_normal(size_t(n), 0.5f, uint64_t(n) + 7);
    double scale = 0;
    for (int64_t i = 0; i < n; ++i) scale += std::fabs(a[size_t(i)] * b[size_t(i)]);
    {
      const IsaTable& t = kernels::table_for(isa);
      EXPECT_NEAR(t.dot(a.data(), b.data(), n), ref.dot(a.data(), b.data(), n), 1e-5 * scale + 1e-6) << isa_name(isa);
      std::vector<float> y1(b), y2(b);
      t.axpy(0.37f, a.data(), y1.data(), n);
      ref.axpy(0.37f, a.data(), y2.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y1[size_t(i)], y2[size_t(i)], 1e-6) << isa_name(isa);
      std::vector<float> r1(static_cast<size_t>(n)), r2(static_cast<size_t>(n));
      t.rmsnorm(a.data(), w.data(), 1e-5f, r1.data(), n);
      ref.rmsnorm(a.data(), w.data(), 1e-5f, r2.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(r1[size_t(i)], r2[size_t(i)], 1e-5 * (1 + std::fabs(r2[size_t(i)]))) << isa_name(isa);
      // The vector exponential (simd_vec.inl) against std::exp, through silu_mul and softmax.
      std::vector<float> g(a);
      for (int64_t i = 0; i < n; ++i) g[size_t(i)] *= 8.0f;  // silu's whole curve, both tails
      std::vector<float> s1(static_cast<size_t>(n)), s2(static_cast<size_t>(n));
      t.silu_mul(g.data(), b.data(), s1.data(), n);
      ref.silu_mul(g.data(), b.data(), s2.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(s1[size_t(i)], s2[size_t(i)], 1e-6 * (1e-6 + std::fabs(s2[size_t(i)]))) << isa_name(isa);
      std::vector<float> p1(g), p2(g);
      t.softmax(p1.data(), n);
      ref.softmax(p2.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(p1[size_t(i)], p2[size_t(i)], 1e-6 * (1e-6 + p2[size_t(i)])) << isa_name(isa);
    }
  }
}

TEST_P(KernelsSimd, ExponentialsAtTheEdges) {
  const IsaTable& t = kernels::table_for(GetParam());
  const std::string isa = isa_name(GetParam());
  // silu far out on both sides (e^-g overflows or vanishes), and NaN stays NaN.
  std::vector<float> g = {-1000, -100, -88.5f, -20, 0, 20, 88.5f, 100, 1000, -0.0f, NAN, 3};
  std::vector<float> u(g.size(), 2.0f), out(g.size());
  t.silu_mul(g.data(), u.data(), out.data(), int64_t(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const float want = g[i] / (1.0f + std::exp(-g[i])) * 2.0f;
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(out[i])) << isa << " g=" << g[i];
    else EXPECT_NEAR(out[i], want, 1e-6f * std::fabs(want) + 1e-30f) << isa << " g=" << g[i];
  }
  // Scores far below the maximum get exactly 0 (e^-x below FLT_MIN), the rest still sum to 1.
  std::vector<float> x = {0, -1e4f, -87.0f, -90.0f, 1, -1e30f, 0.5f, -3, 2, -200, 0, 0, 0, 0, 0, 0, -1, 7};
  t.softmax(x.data(), int64_t(x.size()));
  double sum = 0;
  for (float v : x) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6) << isa;
  EXPECT_EQ(x[1], 0.0f) << isa;
  EXPECT_EQ(x[5], 0.0f) << isa;
  EXPECT_EQ(x[9], 0.0f) << isa;
}

TEST_P(KernelsSimd, Bf16ConversionIsBitExact) {
  // Every ISA's vector conversion gives f32_to_bf16's bits: ties to even, infinities, the largest
  // floats (rounding up to infinity), denormals, signed zeros and NaNs (quieted, payload kept).
  const IsaTable& t = kernels::table_for(GetParam());
  std::vector<float> x = test::random_normal(1000, 3.0f, 11);
  const uint32_t special[] = {0x3F808000, 0x3F818000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                              0x00000001, 0x807FFFFF, 0x00008000, 0x80000000, 0x7F800001, 0xFFC00000,
                              0x7FBFFFFF, 0x3F7FFFFF, 0x0001FFFF, 0x00000000};
  for (size_t i = 0; i < std::size(special); ++i) std::memcpy(&x[i * 37], &special[i], 4);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 32, 33, 1000}) {
    std::vector<bf16_t> got(size_t(n), 0xDEAD);
    t.to_bf16(x.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[size_t(i)], f32_to_bf16(x[size_t(i)])) << isa_name(GetParam()) << " n=" << n << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KernelsSimd, ::testing::Values(Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16, Isa::Amx), isa_param_name);

TEST_P(KernelsOn, AttentionRowOpsEqualPerRowCalls) {
  // dot_rows / axpy_rows over strided cache rows equal dot / axpy called row by row, bitwise,
  // on every ISA (and the SIMD paths match scalar within rounding).
  const IsaTable& ref = kernels::scalar_table();
  const Isa isa = GetParam();
  for (int64_t dim : {1, 7, 16, 40, 64, 67, 128, 200})
    for (int64_t n : {1, 3, 4, 8, 17}) {
      const int64_t stride = dim + 13;
      auto rows = test::random_normal(size_t(n * stride), 1.0f, uint64_t(dim * 100 + n));
      auto q = test::random_normal(size_t(dim), 1.0f, uint64_t(dim + n));
      auto w = test::random_normal(size_t(n), 1.0f, uint64_t(dim * 7 + n));
      auto init = test::random_normal(size_t(dim), 1.0f, uint64_t(dim * 3 + n));
      std::vector<float> want_scores(static_cast<size_t>(n)), want_out(init);
      ref.dot_rows(q.data(), rows.data(), stride, n, dim, 0.5f, want_scores.data());
      ref.axpy_rows(w.data(), rows.data(), stride, n, dim, want_out.data());
      {
        const IsaTable& t = kernels::table_for(isa);
        const std::string tag = std::string(isa_name(isa)) + " dim=" + std::to_string(dim) + " n=" + std::to_string(n);
        std::vector<float> scores(static_cast<size_t>(n)), per_row_scores(static_cast<size_t>(n));
        std::vector<float> out(init), per_row_out(init);
        t.dot_rows(q.data(), rows.data(), stride, n, dim, 0.5f, scores.data());
        t.axpy_rows(w.data(), rows.data(), stride, n, dim, out.data());
        for (int64_t r = 0; r < n; ++r) {
          per_row_scores[size_t(r)] = t.dot(q.data(), rows.data() + r * stride, dim) * 0.5f;
          t.axpy(w[size_t(r)], rows.data() + r * stride, per_row_out.data(), dim);
        }
        EXPECT_EQ(scores, per_row_scores) << tag;
        EXPECT_EQ(out, per_row_out) << tag;
        for (int64_t r = 0; r < n; ++r) EXPECT_NEAR(scores[size_t(r)], want_scores[size_t(r)], 1e-4 * dim) << tag;
        for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(out[size_t(i)], want_out[size_t(i)], 1e-4 * n) << tag;
      }
    }
}

TEST_P(KernelsOn, MatmulIsBatchAndThreadInvariant) {
  // Row m of a batched matmul is bitwise equal to the same row computed alone (the decode
  // kernel), for every ISA, dtype and thread count: the property that makes verification
  // reproduce plain decoding. N is odd and large enough that the pool really splits the work
  // (small matmuls run on the caller), K leaves a partial SIMD step.
  const int64_t M = 7, K = 67, N = 1045;
  auto x = test::random_normal(size_t(M * K), 1.0f, 3);
  auto w = test::random_normal(size_t(N * K), 1.0f, 4);
  auto wb = to_bf16(w);
  ThreadPool one(1), three(3);
  const Isa isa = GetParam();
  {
    for (DType dt : {DType::F32, DType::BF16}) {
      kernels::WeightView view{dt, dt == DType::F32 ? static_cast<const void*>(w.data()) : wb.data(), N, K};
      std::vector<float> batched(size_t(M * N)), threaded(size_t(M * N));
      kernels::matmul(one, x.data(), M, view, batched.data());
      kernels::matmul(three, x.data(), M, view, threaded.data());
      ASSERT_EQ(batched, threaded) << isa_name(isa);
      for (int64_t m = 0; m < M; ++m) {
        std::vector<float> row(static_cast<size_t>(N)), row3(static_cast<size_t>(N));
        kernels::matmul(one, x.data() + m * K, 1, view, row.data());
        kernels::matmul(three, x.data() + m * K, 1, view, row3.data());
        ASSERT_EQ(row, row3) << isa_name(isa) << " row " << m;
        for (int64_t n = 0; n < N; ++n) ASSERT_EQ(row[size_t(n)], batched[size_t(m * N + n)]) << isa_name(isa) << " row " << m;
      }
    }
  }
}

TEST_P(KernelsOn, GatedMatmulEqualsMatmulsThenActivation) {
  // The fused gate/up projection with its activation applied per thread chunk equals two
  // matmuls followed by silu_mul (or a custom activation), bitwise, alone and on 3 threads.
  const int64_t K = 67, N = 1045;
  auto x = test::random_normal(size_t(5 * K), 1.0f, 5);
  auto wg = test::random_normal(size_t(N * K), 1.0f, 6), wu = test::random_normal(size_t(N * K), 1.0f, 7);
  auto wgb = to_bf16(wg), wub = to_bf16(wu);
  ThreadPool one(1), three(3);
  const Isa isa = GetParam();
  const kernels::GatedActivationFn shifted = [](const float* g, const float* u, float* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = g[i] * (u[i] + 1.0f);
  };
  {
    for (DType dt : {DType::F32, DType::BF16})
      for (int64_t M : {1, 5})
        for (bool custom : {false, true}) {
          const bool f32 = dt == DType::F32;
          kernels::WeightView gate{dt, f32 ? static_cast<const void*>(wg.data()) : wgb.data(), N, K};
          kernels::WeightView up{dt, f32 ? static_cast<const void*>(wu.data()) : wub.data(), N, K};
          std::vector<float> g(size_t(M * N)), u(size_t(M * N));
          kernels::matmul(one, x.data(), M, gate, g.data());
          kernels::matmul(one, x.data(), M, up, u.data());
          if (custom) shifted(g.data(), u.data(), g.data(), M * N);
          else kernels::silu_mul(g.data(), u.data(), g.data(), M * N);
          for (ThreadPool* pool : {&one, &three}) {
            std::vector<float> fused(size_t(M * N)), fused_up(size_t(M * N));
            kernels::matmul_gated(*pool, x.data(), M, gate, up, fused.data(), fused_up.data(),
                                  custom ? shifted : kernels::GatedActivationFn{});
            ASSERT_EQ(fused, g) << isa_name(isa) << " " << dtype_name(dt) << " M=" << M << " threads " << pool->size();
            ASSERT_EQ(fused_up, u) << isa_name(isa) << " " << dtype_name(dt) << " M=" << M;
          }
        }
  }
  kernels::WeightView gate{DType::F32, wg.data(), N, K}, narrow{DType::F32, wu.data(), N - 1, K};
  std::vector<float> out(static_cast<size_t>(N)), up_out(static_cast<size_t>(N));
  EXPECT_THROW(kernels::matmul_gated(one, x.data(), 1, gate, narrow, out.data(), up_out.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(Isa, KernelsOn, ::testing::Values(Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16, Isa::Amx), isa_param_name);

TEST(Kernels, Bf16RoundingIsNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.14159f)), 3.140625f);
  // 1 + 2^-8 is exactly halfway between two bf16 values; ties go to the even one (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

TEST(Kernels, SoftmaxAndRope) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f};
  kernels::softmax(x.data(), 3);
  EXPECT_NEAR(x[0] + x[1] + x[2], 1.0f, 1e-6);
  EXPECT_NEAR(x[2] / x[1], std::exp(1.0f), 1e-5);
  std::vector<float> h = {1, 2, 3, 4}, c = {0.5f, 1.0f}, s = {std::sqrt(0.75f), 0.0f};
  kernels::rope_neox(h.data(), c.data(), s.data(), 4);
  EXPECT_NEAR(h[0], 1 * 0.5f - 3 * std::sqrt(0.75f), 1e-6);
  EXPECT_NEAR(h[2], 3 * 0.5f + 1 * std::sqrt(0.75f), 1e-6);
  EXPECT_NEAR(h[1], 2.0f, 1e-6);
}

}  // namespace
}  // namespace eaglet
