// The BF16 pairs layout and the tile kernel (tile_matmul.inl): over the portable tile model on
// every machine (bitwise the scalar reference of the layout, batch invariant, through dispatch and
// a whole model), and the real AMX and AVX-512 BF16 kernels against the reference where they exist.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "engine/model_bundle.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "models/prefill.h"
#include "models/weights.h"
#include "kernels/bf16_pairs.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"
#include "kernels/pack.h"
#include "support/greedy_check.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using namespace kernels;

struct Problem {
  int64_t M, K, N;
  std::vector<float> x;
  std::vector<bf16_t> w;  // row-major [N, K]
  AlignedBytes packed;
  std::vector<bf16_t> xb;  // the padded BF16 activations

  // wide: values of exponents 2^-9..2^8 rather than 2^-9..2^0, so a different order of additions
  // shows in the low bits.
  Problem(int64_t m, int64_t k, int64_t n, unsigned seed, bool wide = false) : M(m), K(k), N(n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<int> e(0, wide ? 8 : 0);
    x.resize(size_t(M * K));
    w.resize(size_t(N * K));
    for (float& v : x) v = std::ldexp(u(rng), e(rng));
    for (bf16_t& v : w) v = f32_to_bf16(std::ldexp(u(rng), e(rng)));
    packed = pack_bf16_pairs(w.data(), N, K);
    xb.resize(bf16_pairs_activation_count(M, K));
    bf16_pairs_activations(x.data(), M, K, xb.data());
  }
  std::vector<float> run(MatmulBf16PairsFn fn, int64_t n0, int64_t n1) const {
    std::vector<float> y(size_t(M * N), NAN);
    fn(xb.data(), M, K, packed.data(), n0, n1, y.data(), N);
    return y;
  }
};

const std::vector<int64_t> kMs = {1, 2, 15, 16, 17, 31, 32, 33, 64};
const std::vector<int64_t> kKs = {2, 31, 32, 33, 90, 128};
const std::vector<int64_t> kNs = {1, 16, 17, 40, 64, 80, 130};  // 1..9 blocks: every sweep remainder

TEST(Bf16Pairs, PackingKeepsEveryElementAndZeroesThePadding) {
  for (int64_t K : kKs)
    for (int64_t N : kNs) {
      Problem p(1, K, N, unsigned(K * 100 + N));
      ASSERT_EQ(p.packed.size(), bf16_pairs_bytes(N, K));
      const auto* q = reinterpret_cast<const bf16_t*>(p.packed.data());
      size_t nonzero_slots = 0;
      for (size_t i = 0; i < p.packed.size() / 2; ++i) nonzero_slots += q[i] != 0;
      size_t nonzero_weights = 0;
      for (bf16_t v : p.w) nonzero_weights += v != 0;
      EXPECT_EQ(nonzero_slots, nonzero_weights) << "padding is not zero (K " << K << ", N " << N << ")";
      WeightView v{DType::BF16, p.packed.data(), N, K};
      v.layout = Layout::Bf16Pairs16;
      EXPECT_EQ(v.nbytes(), p.packed.size());
      std::vector<float> row(static_cast<size_t>(K));
      for (int64_t r = 0; r < N; ++r) {
        read_row(v, r, row.data());
        for (int64_t k = 0; k < K; ++k) ASSERT_EQ(row[size_t(k)], bf16_to_f32(p.w[size_t(r * K + k)])) << r << "," << k;
      }
    }
}

TEST(Bf16Pairs, ActivationsArePaddedWithZeros) {
  const int64_t M = 17, K = 33, ld = 64 + 32;  // K padded to 64, plus one cache line per row
  ASSERT_EQ(bf16_pairs_activation_stride(K), ld);
  Problem p(M, K, 16, 3);
  ASSERT_EQ(p.xb.size(), size_t(32 * ld));
  for (int64_t m = 0; m < 32; ++m)
    for (int64_t k = 0; k < ld; ++k) {
      const bf16_t want = m < M && k < K ? f32_to_bf16(p.x[size_t(m * K + k)]) : bf16_t(0);
      ASSERT_EQ(p.xb[size_t(m * ld + k)], want) << m << "," << k;
    }
}

// The tile kernel over the model does exactly the scalar reference's arithmetic, for every shape
// and column range (ranges start on a 16-row block, as dispatch splits them).
TEST(TileModel, BitwiseTheScalarReferenceOnEveryShape) {
  const IsaTable& ref = scalar_table();
  const IsaTable& model = tile_model_table();
  ASSERT_EQ(model.bf16_layout, Layout::Bf16Pairs16);
  for (int64_t M : kMs)
    for (int64_t K : kKs)
      for (int64_t N : kNs) {
        Problem p(M, K, N, unsigned(M * 10000 + K * 100 + N));
        for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {N > 16 ? 16 : 0, N}, {0, N > 16 ? 16 : N}}) {
          const auto want = p.run(ref.matmul_bf16_pairs, n0, n1);
          const auto got = p.run(model.matmul_bf16_pairs, n0, n1);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              const size_t i = size_t(m * N + n);
              if (n < n0 || n >= n1) ASSERT_TRUE(std::isnan(got[i])) << "wrote outside its columns";
              else ASSERT_EQ(got[i], want[i]) << "M " << M << " K " << K << " N " << N << " at " << m << "," << n;
            }
        }
      }
}

// The layout computes the matmul it stands for: within float rounding of the row-major BF16 one.
TEST(TileModel, MatchesTheRowMajorMatmul) {
  for (int64_t K : {31, 128, 257}) {
    Problem p(5, K, 40, unsigned(K));
    const auto got = p.run(tile_model_table().matmul_bf16_pairs, 0, 40);
    std::vector<bf16_t> xr(p.x.size());
    for (size_t i = 0; i < xr.size(); ++i) xr[i] = f32_to_bf16(p.x[i]);
    std::vector<float> want(got.size());
    scalar_table().matmul_bf16_bf16(xr.data(), 5, K, p.w.data(), 0, 40, want.data(), 40);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * K) << i;
  }
}

// The engine's matmuls on packed weights: plain, grouped and gated, 1 and 2 threads, every row
// bitwise what a one-row call gives (the property greedy speculation relies on).
class PackedDispatch : public ::testing::Test {
 protected:
  void SetUp() override { set_table_override(&tile_model_table()); }
  void TearDown() override { set_table_override(nullptr); }
};

TEST_F(PackedDispatch, BatchesThreadsAndGroupsAreBitwiseInvariant) {
  const int64_t M = 37, K = 96, N = 200;
  Problem p(M, K, N, 11);
  const WeightView raw{DType::BF16, p.w.data(), N, K};
  PackedWeight packed = pack(raw);
  ASSERT_EQ(packed.view.layout, Layout::Bf16Pairs16);
  EXPECT_EQ(kernel_name(packed.view, active_table()), "amx-model bf16");
  std::vector<float> one(static_cast<size_t>(N)), want(static_cast<size_t>(M * N));
  ThreadPool single(1), dual(2);
  for (int64_t m = 0; m < M; ++m) {
    matmul(single, p.x.data() + m * K, 1, packed.view, one.data());
    std::copy(one.begin(), one.end(), want.begin() + m * N);
  }
  for (ThreadPool* pool : {&single, &dual}) {
    std::vector<float> y(size_t(M * N));
    matmul(*pool, p.x.data(), M, packed.view, y.data());
    EXPECT_EQ(y, want) << pool->size() << " threads";
    std::vector<float> g(size_t(M * N)), u(size_t(M * N));
    matmul_gated(*pool, p.x.data(), M, packed.view, packed.view, g.data(), u.data(),
                 [](const float* a, const float*, float* o, int64_t n) { std::copy(a, a + n, o); });
    EXPECT_EQ(g, want);
    EXPECT_EQ(u, want);
    std::vector<float> y1(size_t(5 * N)), y2(size_t(M * N));
    const MatmulJob jobs[] = {{p.x.data() + 3 * K, 5, &packed.view, y1.data()}, {p.x.data(), M, &packed.view, y2.data()}};
    matmul_grouped(*pool, jobs, 2);
    EXPECT_EQ(y2, want);
    EXPECT_TRUE(std::equal(y1.begin(), y1.end(), want.begin() + 3 * N));
  }
}

// Packed weights start on a cache line, so no 64-byte tile row or vector load straddles two
// lines. Large enough that the allocator maps them (glibc then starts 16 bytes into a page).
TEST_F(PackedDispatch, PackedWeightsStartOnACacheLine) {
  const int64_t N = 512, K = 1024;
  std::vector<bf16_t> w(size_t(N * K), f32_to_bf16(0.25f));
  const PackedWeight pairs = pack(WeightView{DType::BF16, w.data(), N, K});
  ASSERT_EQ(pairs.view.layout, Layout::Bf16Pairs16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pairs.view.data) % 64, 0u);
  std::vector<uint8_t> q8(size_t(N * (K / 32) * 34), 0);
  const PackedWeight blocks = pack(WeightView{DType::U8, q8.data(), N, K, QuantScheme::Q8_0});
  ASSERT_NE(blocks.view.data, static_cast<const void*>(q8.data())) << "interleaved, not read in place";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(blocks.view.data) % 64, 0u);
}

TEST_F(PackedDispatch, EmbeddingRowsReadThePackedLayout) {
  Problem p(1, 40, 50, 5);
  PackedWeight packed = pack(WeightView{DType::BF16, p.w.data(), 50, 40});
  const int ids[] = {0, 17, 49};
  std::vector<float> out(3 * 40);
  embedding_rows(packed.view, ids, 3, out.data());
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 40; ++k) ASSERT_EQ(out[size_t(i * 40 + k)], bf16_to_f32(p.w[size_t(ids[i] * 40 + k)]));
}

// A whole BF16 model and draft loaded under the tile model: weights packed at load, and every
// draft shape's greedy output equal to plain greedy decoding through the tile kernel.
TEST_F(PackedDispatch, SpeculativeGreedyEqualsPlainGreedyOnTheTileModel) {
  EAGLET_REQUIRE_SHARED();
  test::TempDir dir;
  const std::string model_dir = dir.file("target");
  test::write_bf16_copy(test::shared_dir() + "/models/stories260K-hf", model_dir);
  ModelBundle b = load_bundle(model_dir);
  ASSERT_EQ(b.model->lm_head().layout, Layout::Bf16Pairs16) << "the target's weights were not packed at load";
  test::DraftSpec ds;
  ds.hidden = ds.target_hidden = 64;
  ds.vocab = ds.draft_vocab = 512;
  ds.heads = 4, ds.kv_heads = 4, ds.head_dim = 16, ds.intermediate = 96;
  ds.dtype = DType::BF16;
  test::write_draft(dir.file("draft"), ds);
  std::vector<std::vector<int>> prompts;
  for (const char* s : {"Once upon a time", "Lily and Tom", "The cat sat", "One day"}) prompts.push_back(b.tokenizer.encode(s));
  SpecOptions eagle;
  eagle.draft_dir = dir.file("draft");
  test::expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts, eagle, 24,
                            {"k=1", "k=3", "topk=4,depth=3,budget=12", "auto"});
}

// Matrices packed at load give their checkpoint memory back at once, so a packed BF16 model is
// never held twice; the packed copies keep the file's values and a released tensor is not handed
// out again. A checkpoint read into memory reads zeros where it was released, so a model that
// still read those bytes would not keep the logits of the scalar table's load, which packs (and
// releases) nothing.
TEST_F(PackedDispatch, PackedCopiesGiveTheirCheckpointMemoryBack) {
  test::TempDir dir;
  test::TinyModelSpec ts;
  ts.intermediate = 256;  // matrices spanning whole pages
  ts.dtype = DType::BF16;
  test::write_tiny_model(dir.file("m"), ts);
  auto ck = std::make_shared<Checkpoint>(Checkpoint::open_dir(dir.file("m")));
  WeightStore store(ck);
  const std::string gate = "model.layers.0.mlp.gate_proj.weight";
  const WeightView w = store.matrix(gate, ts.intermediate, ts.hidden);
  ASSERT_EQ(w.layout, Layout::Bf16Pairs16);
  EXPECT_GE(store.released_bytes(), 4096u);
  test::expect_mentions(test::error_of([&] { ck->get(gate); }), {gate, "released"});
  const Checkpoint fresh = Checkpoint::open_dir(dir.file("m"));  // the file mapped anew
  const TensorInfo& file = fresh.get(gate);
  std::vector<float> packed_row(size_t(ts.hidden)), file_row(size_t(ts.hidden));
  read_row(w, 3, packed_row.data());
  to_f32(DType::BF16, file.data + 3 * ts.hidden * 2, file_row.data(), ts.hidden);
  EXPECT_EQ(packed_row, file_row);

  MappedFile::set_read_into_memory(true);
  struct Restore {
    ~Restore() { MappedFile::set_read_into_memory(false); }
  } restore;
  auto logits = [&](Model& m) {
    KvCache cache(m.kv_shape(4));
    return prefill(test::pool(), m, cache, cache.create(), {1, 5, 9, 14, 3, 27, 40}, 7);
  };
  const std::vector<float> packed = logits(*load_model(dir.file("m")));
  set_table_override(&scalar_table());
  const std::vector<float> plain = logits(*load_model(dir.file("m")));
  ASSERT_EQ(packed.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_NEAR(packed[i], plain[i], 1e-3f * (1 + std::fabs(plain[i]))) << i;
}

// The real pairs kernels, where this CPU has them (AMX tiles; AVX-512 BF16's vdpbf16ps): within
// rounding of the scalar reference, only their own columns written, and bitwise batch invariant
// for M = 1..64 on 1 and 2 threads.
class PairsKernel : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (int(best_supported_isa()) < int(GetParam()))
      GTEST_SKIP() << "this CPU has no " << isa_name(GetParam()) << " (best here: " << isa_name(best_supported_isa())
                   << ")";
    if (GetParam() == Isa::Amx) {
      ASSERT_STREQ(amx_table().name, "amx") << "AMX is granted but its kernels are off (see the log)";
    }
    ASSERT_EQ(table().bf16_layout, Layout::Bf16Pairs16) << table().name << " does not read the pairs layout";
  }
  const IsaTable& table() const { return table_for(GetParam()); }
};

TEST_P(PairsKernel, WithinRoundingOfTheReference) {
  for (int64_t M : kMs)
    for (int64_t K : kKs)
      for (int64_t N : kNs) {
        Problem p(M, K, N, unsigned(M * 10000 + K * 100 + N));
        for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {N > 16 ? 16 : 0, N}, {0, N > 16 ? 16 : N}}) {
          const auto want = p.run(scalar_table().matmul_bf16_pairs, n0, n1);
          const auto got = p.run(table().matmul_bf16_pairs, n0, n1);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              const size_t i = size_t(m * N + n);
              if (n < n0 || n >= n1) ASSERT_TRUE(std::isnan(got[i])) << "wrote outside its columns";
              else ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + K)) << "M " << M << " K " << K << " N " << N << " at " << m << "," << n;
            }
        }
      }
}

TEST_P(PairsKernel, BatchInvariantOverRowsAndThreads) {
  set_table_override(&table());
  // K = 600 and 1056 take several of the AVX-512 kernel's K chunks (from 9 rows, and up to 8);
  // N = 296 leaves a partial block and groups of blocks of every remainder.
  for (int64_t K : {256, 600, 1056}) {
    const int64_t N = 296;
    Problem p(64, K, N, unsigned(21 + K));
    PackedWeight packed = pack(WeightView{DType::BF16, p.w.data(), N, K});
    ASSERT_EQ(packed.view.layout, Layout::Bf16Pairs16);
    ThreadPool single(1), dual(2);
    std::vector<float> one(size_t(64 * N));
    for (int64_t m = 0; m < 64; ++m) matmul(single, p.x.data() + m * K, 1, packed.view, one.data() + m * N);
    for (int64_t M = 1; M <= 64; ++M)
      for (ThreadPool* pool : {&single, &dual}) {
        std::vector<float> y(size_t(M * N));
        matmul(*pool, p.x.data(), M, packed.view, y.data());
        ASSERT_TRUE(std::equal(y.begin(), y.end(), one.begin())) << "K " << K << " M " << M << ", " << pool->size() << " threads";
      }
  }
  set_table_override(nullptr);
}

// Bitwise the tile model (`want`, from the model's table) over row counts that take every path.
void expect_tile_model_bits(MatmulBf16PairsFn fn, std::initializer_list<int64_t> Ms, const char* what) {
  for (int64_t M : Ms)
    for (int64_t K : {32, 90, 2048})
      for (int64_t N : {40, 130}) {
        const Problem p(M, K, N, unsigned(M * 7919 + K + N), /*wide=*/true);
        const auto want = p.run(tile_model_table().matmul_bf16_pairs, 0, N);
        const auto got = p.run(fn, 0, N);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << what << ": M " << M << " K " << K << " N " << N << " at " << i / size_t(N) << "," << i % size_t(N)
              << ": " << got[i] << " against the model's " << want[i];
      }
}

// The tiles add in the order the tile model describes, bit for bit (the instruction reference's
// one product after another is not what the hardware does), so AMX's decode rows can run on the
// vector loop in the same order and speculation stays bitwise lossless.
TEST(AmxTiles, GiveTheTileModelsBitsAndSoDoesTheDecodeLoop) {
  if (int(best_supported_isa()) < int(Isa::Amx))
    GTEST_SKIP() << "this CPU has no AMX-BF16 (best here: " << isa_name(best_supported_isa()) << ")";
  ASSERT_STREQ(amx_table().name, "amx") << "AMX is granted but its kernels are off (see the log)";
  ASSERT_NE(amx_table().bf16_pairs_name, nullptr) << "the tiles' decode rows did not move to the vector loop (see the log)";
  expect_tile_model_bits(amx_table().matmul_bf16_pairs, {1, 2, 4, 16, 37}, "amx table");
}

// The AVX-512 loop in the tiles' order, on every CPU with vdpbf16ps (AMD's too): the model's bits.
TEST(TileOrderLoop, GivesTheTileModelsBits) {
  if (int(best_supported_isa()) < int(Isa::Avx512Bf16))
    GTEST_SKIP() << "this CPU has no AVX-512 BF16 (best here: " << isa_name(best_supported_isa()) << ")";
  expect_tile_model_bits(avx512::matmul_bf16_pairs_tile_order, {1, 2, 3, 4}, "tile-order loop");
}

INSTANTIATE_TEST_SUITE_P(Isa, PairsKernel, ::testing::Values(Isa::Avx512Bf16, Isa::Amx),
                         [](const ::testing::TestParamInfo<Isa>& i) { return std::string(isa_name(i.param)); });

}  // namespace
}  // namespace eaglet
