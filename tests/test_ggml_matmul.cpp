// The GGUF block matmuls (Q8_0, Q4_0, Q4_K, Q6_K on rows interleaved by 8 or 16) against the
// float product of the dequantised weights and activations, on every kernel table (scalar, AVX2,
// AVX-512 with VNNI, AMX INT8 and its portable tile model), across batches, threads and the
// extreme codes; the interleaved layouts and the activation quantiser on their own. A table this
// CPU cannot run is reported as skipped, with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <tuple>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"
#include "kernels/pack.h"

namespace eaglet::kernels {
namespace {

constexpr Isa kIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16};
bool runs_here(Isa isa) { return int(isa) <= int(best_supported_isa()); }

// The tables whose GGUF kernels differ: each ISA's, AMX's INT8 tiles and the tile model of them.
const char* const kTables[] = {"scalar", "avx2", "avx512", "avx512bf16", "amx", "amx-model"};

// The table named `name`, or null with the reason this machine cannot run it.
const IsaTable* table_named(const std::string& name, std::string* why) {
  if (name == "amx-model") return &tile_model_table();
  Isa isa{};
  if (!parse_isa(name.c_str(), &isa)) {
    *why = "no table " + name;
    return nullptr;
  }
  if (!runs_here(isa)) {
    *why = "this CPU cannot run the " + name + " kernels (it has: " + cpu_features().names() + ")";
    return nullptr;
  }
  const IsaTable& t = table_for(isa);
  if (isa == Isa::Amx && std::string(t.q8_0.name) != "amx-int8") {
    *why = "the AMX INT8 kernels are off on this machine (see the log)";
    return nullptr;
  }
  return &t;
}

// Runs the ops on a table for a scope.
struct UseTable {
  explicit UseTable(const IsaTable* t) { set_table_override(t); }
  ~UseTable() { set_table_override(nullptr); }
};

// N rows of K weights of `type` in GGUF layout: Q8_0 / Q4_0 from the quantisers, Q4_K / Q6_K
// random bytes with small positive scales (every code, scale and min pattern occurs).
std::vector<uint8_t> random_blocks(GgmlType type, int64_t N, int64_t K, std::mt19937& rng) {
  std::vector<uint8_t> out(ggml_row_bytes(type, K) * size_t(N));
  if (type == GgmlType::Q8_0 || type == GgmlType::Q4_0) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(size_t(N * K));
    for (auto& v : wf) v = nd(rng);
    if (type == GgmlType::Q8_0) quantize_row_q8_0(wf.data(), reinterpret_cast<BlockQ8_0*>(out.data()), N * K);
    else quantize_row_q4_0(wf.data(), reinterpret_cast<BlockQ4_0*>(out.data()), N * K);
    return out;
  }
  for (auto& b : out) b = uint8_t(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  if (type == GgmlType::Q4_K) {
    for (auto& b : std::span(reinterpret_cast<BlockQ4_K*>(out.data()), size_t(N * K / 256))) {
      b.d = f32_to_f16(scale(rng));
      b.dmin = f32_to_f16(scale(rng));
    }
  } else {
    for (auto& b : std::span(reinterpret_cast<BlockQ6_K*>(out.data()), size_t(N * K / 256))) b.d = f32_to_f16(scale(rng));
  }
  return out;
}

// Each type on each table: bitwise the scalar reference (one operation sequence, whatever the
// layout), within float rounding of the dequantised product (the block sums are exact integers),
// and batch invariant: a row computed in a batch, alone, or on three threads is bitwise the same.
// M covers AMX's single pass (<= 16 rows), several passes and a partial one; N = 61 leaves a
// partial group of 8 and of 16 rows; K = 160 an odd number of blocks.
class BlockMatmul : public testing::TestWithParam<std::tuple<GgmlType, const char*>> {};

TEST_P(BlockMatmul, MatchesTheDequantisedProductAndIsBatchInvariant) {
  const auto [type, table_name] = GetParam();
  std::string why;
  const IsaTable* table = table_named(table_name, &why);
  if (!table) GTEST_SKIP() << why;
  const QuantScheme q = interleaved_scheme(type);
  // K = 1024 takes the AVX-512 VNNI kernel over K in several chunks at M = 33.
  const std::vector<int64_t> Ks = ggml_block_weights(q) == 32 ? std::vector<int64_t>{160, 1024} : std::vector<int64_t>{512};
  for (const int64_t K : Ks) {
  SCOPED_TRACE("K " + std::to_string(K));
  const int64_t N = 61;
  std::mt19937 rng(11);
  const std::vector<uint8_t> blocks = random_blocks(type, N, K, rng);
  std::vector<float> x(size_t(33 * K)), wd(size_t(N * K));
  for (auto& v : x) v = std::normal_distribution<float>(0, 1)(rng);
  dequantize_row(type, blocks.data(), wd.data(), N * K);
  // As models get them: the file's rows, packed for each table's kernels.
  const WeightView file{DType::U8, blocks.data(), N, K, q};
  const PackedWeight ref = pack(file, scalar_table()), p = pack(file, *table);
  const WeightView view = p.view;
  EXPECT_EQ(view.layout, table->ggml(q).layout);
  EXPECT_EQ(view.nbytes(), p.bytes.size());
  if (type == GgmlType::Q8_0 || type == GgmlType::Q4_0) {  // 61 rows padded to 64
    EXPECT_EQ(p.bytes.size(), ggml_row_bytes(type, K) * 64);
  }
  ThreadPool one(1), three(3);
  for (int64_t M : {1, 2, 4, 9, 16, 17, 33}) {
    std::vector<ActBlockQ8> xq(size_t(M * K / 32));
    quantize_activations(x.data(), M, K, xq.data());
    std::vector<float> scalar(size_t(M * N)), batched(size_t(M * N)), threaded(size_t(M * N));
    {
      UseTable use(&scalar_table());
      matmul(one, x.data(), M, ref.view, scalar.data());
    }
    UseTable use(table);
    matmul(one, x.data(), M, view, batched.data());
    matmul(three, x.data(), M, view, threaded.data());
    ASSERT_EQ(batched, threaded) << "M " << M;
    ASSERT_EQ(batched, scalar) << "M " << M << ": differs from the scalar reference";
    for (int64_t m = 0; m < M; ++m) {
      std::vector<float> row(static_cast<size_t>(N));
      matmul(one, x.data() + m * K, 1, view, row.data());
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_EQ(row[size_t(n)], batched[size_t(m * N + n)]) << "M " << M << " row " << m;
        double want = 0, scale = 0;
        for (int64_t k = 0; k < K; ++k) {
          const ActBlockQ8& a = xq[size_t((m * K + k) / 32)];
          const double xv = double(a.d) * a.q[k % 32];
          want += double(wd[size_t(n * K + k)]) * xv;
          scale += std::fabs(double(wd[size_t(n * K + k)]) * xv);
        }
        EXPECT_NEAR(batched[size_t(m * N + n)], want, 1e-5 * scale + 1e-6) << m << "," << n;
      }
    }
  }
  UseTable use(table);
  WeightView odd{DType::U8, p.bytes.data(), 1, K + 8, q};
  odd.layout = view.layout;
  std::vector<float> y(1), x_odd(size_t(K + 8));
  EXPECT_THROW(matmul(one, x_odd.data(), 1, odd, y.data()), Error);
  if (view.layout != ref.view.layout) {  // weights packed for other kernels are refused
    EXPECT_THROW(matmul(one, x.data(), 1, ref.view, y.data()), Error);
  }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, BlockMatmul,
                         testing::Combine(testing::Values(GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K),
                                          testing::ValuesIn(kTables)),
                         [](const auto& info) {
                           std::string name = std::string(ggml_type_info(uint32_t(std::get<0>(info.param)))->name) +
                                              "_" + std::get<1>(info.param);
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// The extreme codes against activation codes of +-127: Q8_0's -128 (which files may hold though
// the quantiser never writes it), nibbles of 15 in every position (Q4_0, Q4_K with the largest
// scale and min), and Q6_K's -32. The SIMD kernels sum 16-bit pair products; these are the
// largest such sums, and must not wrap or saturate.
class BlockMatmulLimits : public testing::TestWithParam<const char*> {};

TEST_P(BlockMatmulLimits, HoldTheirExtremeSums) {
  std::string why;
  const IsaTable* table = table_named(GetParam(), &why);
  if (!table) GTEST_SKIP() << why;
  const int64_t K = 256, N = 8;
  std::vector<BlockQ8_0> w8(size_t(N * K / 32));
  std::vector<BlockQ4_0> w4(size_t(N * K / 32));
  std::vector<BlockQ4_K> w4k(size_t(N * K / 256));
  std::vector<BlockQ6_K> w6k(size_t(N * K / 256));
  for (auto& b : w8) {
    b.d = f32_to_f16(1.0f);
    std::fill(std::begin(b.q), std::end(b.q), int8_t(-128));
  }
  for (auto& b : w4) {
    b.d = f32_to_f16(1.0f);
    std::fill(std::begin(b.q), std::end(b.q), uint8_t(0xFF));
  }
  for (auto& b : w4k) {  // scales and mins all 63: w = 63 * 15 - 63
    b.d = b.dmin = f32_to_f16(1.0f);
    std::fill(std::begin(b.scales), std::end(b.scales), uint8_t(0xFF));
    std::fill(std::begin(b.q), std::end(b.q), uint8_t(0xFF));
  }
  for (auto& b : w6k) {  // codes 0 - 32, scale -128: w = 4096
    b.d = f32_to_f16(1.0f);
    std::fill(std::begin(b.ql), std::end(b.ql), uint8_t(0));
    std::fill(std::begin(b.qh), std::end(b.qh), uint8_t(0));
    std::fill(std::begin(b.scales), std::end(b.scales), int8_t(-128));
  }
  const std::tuple<GgmlType, const void*, float> cases[] = {{GgmlType::Q8_0, w8.data(), -128.0f},
                                                             {GgmlType::Q4_0, w4.data(), 7.0f},
                                                             {GgmlType::Q4_K, w4k.data(), 63.0f * 15 - 63.0f},
                                                             {GgmlType::Q6_K, w6k.data(), 4096.0f}};
  ThreadPool one(1);
  UseTable use(table);
  for (float sign : {1.0f, -1.0f})
    for (const auto& [type, data, weight] : cases)
      for (int64_t M : {1, 2}) {  // AMX: M = 1 runs VNNI, M = 2 the tiles
        std::vector<float> x(static_cast<size_t>(M * K), sign);  // codes of 127 * sign, scale 1/127
        const PackedWeight packed = pack(WeightView{DType::U8, data, N, K, interleaved_scheme(type)}, *table);
        std::vector<float> y(static_cast<size_t>(M * N));
        matmul(one, x.data(), M, packed.view, y.data());
        for (float v : y)
          EXPECT_NEAR(v, weight * float(K) * sign, 1e-5 * std::fabs(weight * K))
              << ggml_type_info(uint32_t(type))->name << " M " << M;
      }
}

INSTANTIATE_TEST_SUITE_P(Tables, BlockMatmulLimits, testing::ValuesIn(kTables), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

// Both interleaved layouts hold every row's blocks unchanged, and embedding lookups read them.
TEST(BlockMatmulLayout, InterleavedRowsRoundTrip) {
  const int64_t N = 13, K = 96;
  std::mt19937 rng(5);
  for (int group : {kRowGroup, kRowGroup16})
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      std::vector<uint8_t> raw(ggml_row_bytes(type, K) * size_t(N));
      for (auto& b : raw) b = uint8_t(rng());
      const AlignedBytes packed = interleave_rows(type, raw.data(), N, K, group);
      const size_t row = ggml_row_bytes(type, K);
      EXPECT_EQ(packed.size(), row * 16);  // two groups of 8, one of 16
      WeightView view{DType::U8, packed.data(), N, K, interleaved_scheme(type)};
      view.layout = group == kRowGroup ? Layout::Rows8 : Layout::Rows16;
      EXPECT_EQ(view.nbytes(), packed.size());
      for (int64_t r = 0; r < N; ++r) {
        std::vector<uint8_t> back(row);
        deinterleave_row(type, packed.data(), K, r, back.data(), group);
        EXPECT_TRUE(std::equal(back.begin(), back.end(), raw.begin() + r * int64_t(row)))
            << int(type) << " row " << r << " of groups of " << group;
        std::vector<float> got(static_cast<size_t>(K)), want(static_cast<size_t>(K));
        read_row(view, r, got.data());
        dequantize_row(type, raw.data() + r * int64_t(row), want.data(), K);
        // Random scale bytes include fp16 NaNs, so the rows are compared bit for bit.
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << "row " << r << " of groups of " << group;
      }
    }
}

// Every ISA quantises activations to the same codes and sums as the scalar reference, ties
// (x * 127 / amax exactly half-way) rounded to even as nearbyint does, and zero blocks to zero.
// An ISA this CPU lacks is reported as skipped, with the reason.
class ActivationQuantisation : public ::testing::TestWithParam<Isa> {};

TEST_P(ActivationQuantisation, GivesTheScalarCodes) {
  const Isa isa = GetParam();
  if (!runs_here(isa)) GTEST_SKIP() << "this CPU cannot run the " << isa_name(isa) << " kernels (it has: " << cpu_features().names() << ")";
  const int64_t M = 3, K = 128;
  std::mt19937 rng(9);
  std::vector<float> x(size_t(M * K));
  for (auto& v : x) v = std::normal_distribution<float>(0, 3)(rng);
  for (int j = 0; j < 32; ++j) x[size_t(32 + j)] = j == 0 ? 127.0f : float(j % 7) - 3.5f;  // id = 1: ties
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);
  std::vector<ActBlockQ8> want(size_t(M * K / 32));
  table_for(Isa::Scalar).quantize_act(x.data(), M, K, want.data());
  EXPECT_EQ(want[1].q[1], -2);  // -2.5 -> -2
  EXPECT_EQ(want[1].q[4], 0);   // 0.5 -> 0
  EXPECT_EQ(want[1].q[5], 2);   // 1.5 -> 2
  EXPECT_EQ(want[2].d, 0.0f);
  for (const ActBlockQ8& a : want) EXPECT_EQ(a.sum, std::accumulate(std::begin(a.q), std::end(a.q), 0));
  std::vector<ActBlockQ8> got(want.size());
  table_for(isa).quantize_act(x.data(), M, K, got.data());
  for (size_t b = 0; b < want.size(); ++b) {
    EXPECT_EQ(got[b].d, want[b].d) << isa_name(isa) << " block " << b;
    EXPECT_EQ(got[b].sum, want[b].sum) << isa_name(isa) << " block " << b;
    EXPECT_TRUE(std::equal(std::begin(got[b].q), std::end(got[b].q), std::begin(want[b].q))) << isa_name(isa) << " block " << b;
  }
}
INSTANTIATE_TEST_SUITE_P(Isa, ActivationQuantisation, ::testing::ValuesIn(kIsas),
                         [](const auto& i) { return std::string(isa_name(i.param)); });

}  // namespace
}  // namespace eaglet::kernels
