// FP8 (MXFP8 and 128-block) weights on the BF16 tiles: the FP8 pairs layout round-trips, every
// e4m3 code and E8M0 scale decodes as fp8_pairs.h defines it, and matmuls on the AMX kernel, its
// portable tile model and the AVX-512 BF16 vector kernel match the product of the decoded weights
// and BF16-rounded activations, bit for bit whatever M (1..40: one tile pass, two, and the decoded
// panel), the row split or the thread count. A table the CPU cannot run is reported as skipped,
// with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/fp8_pairs.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"
#include "kernels/pack.h"

namespace eaglet::kernels {
namespace {

struct UseTable {
  explicit UseTable(const IsaTable* t) { set_table_override(t); }
  ~UseTable() { set_table_override(nullptr); }
};

// Row-major e4m3 codes with their scales as the checkpoint holds them.
struct Fp8Weights {
  QuantScheme q;
  int64_t N, K;
  std::vector<uint8_t> codes, e8m0;
  std::vector<float> block;
  WeightView view() const {
    WeightView v{DType::F8_E4M3, codes.data(), N, K};
    v.quant = q;
    v.scales = q == QuantScheme::Mxfp8 ? static_cast<const void*>(e8m0.data()) : block.data();
    v.scale_bytes = q == QuantScheme::Mxfp8 ? e8m0.size() : block.size() * sizeof(float);
    return v;
  }
};

// Random codes (NaN replaced), or with `normal_rows` only normal numbers in rows below it: tiles
// the decoder takes without a lookup.
Fp8Weights random_weights(QuantScheme q, int64_t N, int64_t K, uint64_t seed, int64_t normal_rows = 0) {
  std::mt19937_64 rng(seed);
  Fp8Weights w{q, N, K, std::vector<uint8_t>(size_t(N * K)), std::vector<uint8_t>(size_t(N * K / 32)), {}};
  for (size_t i = 0; i < w.codes.size(); ++i) {
    uint8_t& c = w.codes[i];
    c = uint8_t(rng());
    if ((c & 0x7f) == 0x7f || (int64_t(i) / K < normal_rows && !e4m3_is_normal(c))) c = uint8_t(0x38 | (c & 0x80));
  }
  for (auto& e : w.e8m0) e = uint8_t(118 + rng() % 12);
  w.block.resize(size_t((N + 127) / 128 * ((K + 127) / 128)));
  for (auto& s : w.block) s = 0.001f + float(rng() % 1000) * 1e-5f;
  return w;
}

TEST(Fp8Pairs, PackingKeepsEveryWeightAndScale) {
  for (QuantScheme q : {QuantScheme::Mxfp8, QuantScheme::Fp8Block128}) {
    const Fp8Weights w = random_weights(q, 150, 288, 3);
    const AlignedBytes packed = pack_fp8_pairs(w.codes.data(), w.view().scales, q, w.N, w.K);
    ASSERT_EQ(packed.size(), fp8_pairs_code_bytes(w.N, w.K) + fp8_pairs_scale_bytes(q, w.N, w.K));
    WeightView p = w.view();
    p.data = packed.data();
    p.layout = Layout::Fp8Pairs16;
    p.scales = packed.data() + fp8_pairs_code_bytes(w.N, w.K);
    std::vector<float> want(size_t(w.K)), got(size_t(w.K));
    for (int64_t r = 0; r < w.N; ++r) {
      read_row(w.view(), r, want.data());
      read_row(p, r, got.data());
      ASSERT_EQ(want, got) << "row " << r;
    }
    // Padding rows decode to zeros.
    const uint8_t* pad = packed.data() + fp8_pairs_index(w.K, 151, 0);
    EXPECT_EQ(*pad, 0);
  }
  // Each MXFP8 tile says whether all its codes are normal numbers; padding rows (zeros) are not.
  const Fp8Weights w = random_weights(QuantScheme::Mxfp8, 40, 64, 4, 32);
  const AlignedBytes packed = pack_fp8_pairs(w.codes.data(), w.e8m0.data(), QuantScheme::Mxfp8, w.N, w.K);
  const void* scales = packed.data() + fp8_pairs_code_bytes(w.N, w.K);
  for (int64_t rb = 0; rb < 3; ++rb)
    for (int64_t g = 0; g < 2; ++g) {
      bool normal = rb < 2;
      for (int64_t r = rb * 16; r < rb * 16 + 16; ++r)
        for (int64_t k = g * 32; k < g * 32 + 32; ++k) normal = normal && r < w.N && e4m3_is_normal(w.codes[size_t(r * w.K + k)]);
      EXPECT_EQ(fp8_pairs_tile_scales(QuantScheme::Mxfp8, scales, w.K, rb, g).normal, normal) << rb << ", " << g;
      EXPECT_EQ(normal, rb < 2);
    }
}

TEST(Fp8Pairs, DecoderRoundsToBf16AndFlushesWhatAmxCannotRead) {
  EXPECT_EQ(decode_fp8(0x38, 1.0f), f32_to_bf16(1.0f));
  EXPECT_EQ(decode_fp8(0xb8, 0x1p-10f), f32_to_bf16(-0x1p-10f));
  EXPECT_EQ(decode_fp8(0x01, 0x1p-120f), 0);           // 2^-129: below F32's normal range
  EXPECT_EQ(decode_fp8(0x81, 0x1p-120f), 0x8000);      // signed
  EXPECT_EQ(decode_fp8(0x7e, 0x1p120f), 0x7f80);       // 448 * 2^120 overflows: infinity
  EXPECT_EQ(decode_fp8(0x7f, 1.0f), 0x7fc0);           // NaN code
  EXPECT_EQ(decode_fp8(0x38, NAN), 0x7fc0);            // NaN scale
  EXPECT_EQ(decode_fp8(0x39, 0.003f), f32_to_bf16(1.125f * 0.003f));  // FP8 block: rounded
}

// The tables that read the FP8 pairs layout; AMX and AVX-512 BF16 only where they run.
class Fp8Tiles : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string name = GetParam();
    if (name == "amx-model") {
      t_ = &tile_model_table();
      return;
    }
    if (name == "avx512bf16") {
      if (!cpu_features().avx512_bf16 || !cpu_features().avx512_vbmi)
        GTEST_SKIP() << "this CPU has no AVX-512 BF16 and VBMI (it has: " << cpu_features().names() << ")";
      t_ = &table_for(Isa::Avx512Bf16);
      ASSERT_EQ(t_->fp8_layout, Layout::Fp8Pairs16) << "the AVX-512 BF16 table should decode FP8 pairs here";
      return;
    }
    if (best_supported_isa() != Isa::Amx)
      GTEST_SKIP() << "this CPU has no AMX (it has: " << cpu_features().names() << ")";
    t_ = &table_for(Isa::Amx);
    if (t_->fp8_layout != Layout::Fp8Pairs16) GTEST_SKIP() << "the AMX FP8 kernel is off on this machine (see the log)";
  }
  const IsaTable* t_ = nullptr;
};

// Where the CPU has what the AMX FP8 kernel needs, its start-up self-test must pass: a wrong
// decoder would otherwise only turn the kernel off (and the tests above into skips).
TEST(Fp8Pairs, AmxKernelIsOnWhereTheCpuHasIt) {
  if (best_supported_isa() != Isa::Amx || !cpu_features().avx512_vbmi)
    GTEST_SKIP() << "this CPU lacks AMX or AVX-512 VBMI (it has: " << cpu_features().names() << ")";
  EXPECT_EQ(table_for(Isa::Amx).fp8_layout, Layout::Fp8Pairs16) << "the AMX FP8 self-test failed (see the log)";
}

// Reports name the kernel that runs: the pairs kernels by their table, the row-major ones (F32
// activations) with ">f32", as for BF16.
TEST(Fp8Pairs, KernelNamesSayWhichKernelRuns) {
  const Fp8Weights w = random_weights(QuantScheme::Mxfp8, 32, 64, 6);
  if (int(best_supported_isa()) < int(Isa::Avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  EXPECT_EQ(kernel_name(pack(w.view(), table_for(Isa::Avx2)).view, table_for(Isa::Avx2)), "avx2 mxfp8>f32");
  if (!cpu_features().avx512_bf16 || !cpu_features().avx512_vbmi)
    GTEST_SKIP() << "this CPU has no AVX-512 BF16 and VBMI (it has: " << cpu_features().names() << ")";
  const IsaTable& t = table_for(Isa::Avx512Bf16);
  EXPECT_EQ(kernel_name(pack(w.view(), t).view, t), "avx512bf16 mxfp8");
}

// y = x * W^T on t_ through the public matmul (weights packed for t_).
std::vector<float> run(const IsaTable* t, ThreadPool& pool, const std::vector<float>& x, int64_t M,
                       const Fp8Weights& w) {
  UseTable use(t);
  const PackedWeight p = pack(w.view(), *t);
  EXPECT_EQ(p.view.layout, Layout::Fp8Pairs16);
  std::vector<float> y(size_t(M * w.N), NAN);
  matmul(pool, x.data(), M, p.view, y.data());
  return y;
}

TEST_P(Fp8Tiles, EveryCodeAndScaleDecodesAsDefined) {
  ThreadPool pool(1);
  // One-hot activations (1.0 is exact in BF16): y = W^T, each output one product.
  const int64_t K = 32;
  std::vector<float> x(size_t(K * K), 0.0f);
  for (int64_t k = 0; k < K; ++k) x[size_t(k * K + k)] = 1.0f;
  Fp8Weights w{QuantScheme::Mxfp8, 8, K, std::vector<uint8_t>(256), std::vector<uint8_t>(8, 127), {}};
  // (NaN codes, which spoil every output of their row, are NanCodeSpoilsOnlyItsOutput's.)
  for (int c = 0; c < 256; ++c) w.codes[size_t(c)] = (c & 0x7f) == 0x7f ? 0 : uint8_t(c);
  const std::vector<float> y = run(t_, pool, x, K, w);
  for (int c = 0; c < 256; ++c)
    ASSERT_EQ(y[size_t((c % K) * 8 + c / K)], e4m3_to_f32(w.codes[size_t(c)])) << "code " << c;
  // A tile of normal codes only takes the decoder's path without a lookup: every normal code times
  // the scales at the ends of its range and between.
  for (const int e8m0 : {10, 127, 200, 246}) {
    Fp8Weights n{QuantScheme::Mxfp8, 8, K, std::vector<uint8_t>(256), std::vector<uint8_t>(8, uint8_t(e8m0)), {}};
    for (int c = 0; c < 256; ++c) n.codes[size_t(c)] = e4m3_is_normal(uint8_t(c)) ? uint8_t(c) : uint8_t(0x38 | (c & 0x80));
    const std::vector<float> yn = run(t_, pool, x, K, n);
    for (int c = 0; c < 256; ++c)
      ASSERT_EQ(double(yn[size_t((c % K) * 8 + c / K)]), std::ldexp(double(e4m3_to_f32(n.codes[size_t(c)])), e8m0 - 127))
          << "code " << c << ", e8m0 " << e8m0;
  }
  // Weight 1.0 times every E8M0 scale: 2^(e - 127) exactly, but 2^-127 (code 0) is below F32's
  // normal range and reads as zero; 255 is NaN.
  Fp8Weights s{QuantScheme::Mxfp8, 256, K, std::vector<uint8_t>(size_t(256 * K), 0x38), std::vector<uint8_t>(256), {}};
  for (int e = 0; e < 256; ++e) s.e8m0[size_t(e)] = uint8_t(e);
  const std::vector<float> ys = run(t_, pool, x, 1, s);
  for (int e = 0; e < 256; ++e) {
    if (e == 255) EXPECT_TRUE(std::isnan(ys[size_t(e)]));
    else if (e == 0) EXPECT_EQ(ys[size_t(e)], 0.0f);
    else ASSERT_EQ(double(ys[size_t(e)]), std::ldexp(1.0, e - 127)) << "e8m0 " << e;
  }
}

TEST_P(Fp8Tiles, MatchesDecodedProductAndIsBatchAndThreadInvariant) {
  ThreadPool one(1), two(2);
  uint64_t seed = 1;
  for (QuantScheme q : {QuantScheme::Mxfp8, QuantScheme::Fp8Block128})
    // (K = 2048 splits K into chunks for 5-8 rows on the vector kernel.)
    for (auto [N, K, normal_rows] : {std::tuple<int64_t, int64_t, int64_t>{40, 96, 0}, {130, 256, 0}, {16, 32, 0},
                                     {64, 128, 64}, {130, 256, 96}, {48, 2048, 32}}) {
      const Fp8Weights w = random_weights(q, N, K, seed++, normal_rows);
      const int64_t Mmax = 40;
      std::mt19937 rng(unsigned(seed++));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(size_t(Mmax * K));
      for (float& v : x) v = nd(rng);
      // Rows one at a time (the decode step) on one thread: the bits every batch must give.
      std::vector<float> rows(size_t(Mmax * N));
      for (int64_t m = 0; m < Mmax; ++m) {
        const std::vector<float> xm(x.begin() + m * K, x.begin() + (m + 1) * K);
        const std::vector<float> ym = run(t_, one, xm, 1, w);
        std::copy(ym.begin(), ym.end(), rows.begin() + m * N);
      }
      for (int64_t m = 0; m < Mmax; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double a = bf16_to_f32(f32_to_bf16(x[size_t(m * K + k)]));
            const double b = bf16_to_f32(decode_fp8(w.codes[size_t(n * K + k)],
                                                    q == QuantScheme::Mxfp8 ? e8m0_to_f32(w.e8m0[size_t(n * (K / 32) + k / 32)])
                                                                            : w.block[size_t((n / 128) * ((K + 127) / 128) + k / 128)]));
            want += a * b;
            mag += std::fabs(a * b);
          }
          ASSERT_NEAR(rows[size_t(m * N + n)], want, 1e-5 * mag + 1e-30) << "m=" << m << " n=" << n << " K=" << K;
        }
      for (int64_t M : {2, 3, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40})
        for (ThreadPool* pool : {&one, &two}) {
          const std::vector<float> xs(x.begin(), x.begin() + M * K);
          const std::vector<float> y = run(t_, *pool, xs, M, w);
          for (int64_t i = 0; i < M * N; ++i)
            ASSERT_EQ(y[size_t(i)], rows[size_t(i)]) << "M=" << M << " y[" << i / N << ", " << i % N << "] N=" << N;
        }
    }
}

TEST_P(Fp8Tiles, NanCodeSpoilsOnlyItsOutput) {
  ThreadPool pool(2);
  for (QuantScheme q : {QuantScheme::Mxfp8, QuantScheme::Fp8Block128}) {
    Fp8Weights w = random_weights(q, 48, 64, 5);
    std::vector<float> x(size_t(20 * 64), 0.5f);
    const std::vector<float> clean = run(t_, pool, x, 20, w);
    w.codes[size_t(21 * 64 + 40)] = 0xff;
    const std::vector<float> spoilt = run(t_, pool, x, 20, w);
    for (int64_t m = 0; m < 20; ++m)
      for (int64_t n = 0; n < 48; ++n) {
        if (n == 21) EXPECT_TRUE(std::isnan(spoilt[size_t(m * 48 + n)])) << "m=" << m;
        else ASSERT_EQ(spoilt[size_t(m * 48 + n)], clean[size_t(m * 48 + n)]) << "m=" << m << " n=" << n;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, Fp8Tiles, ::testing::Values("amx", "amx-model", "avx512bf16"), [](const auto& i) {
  const std::string name = i.param;
  return name == "amx-model" ? std::string("amx_model") : name;
});

}  // namespace
}  // namespace eaglet::kernels
