// The measured forward-cost table: which token counts it holds, and when a cached one is reused.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "models/model.h"
#include "speculation/cost_model.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

std::vector<int> sizes_of(const CostModel& m) {
  std::vector<int> s;
  for (auto& p : m.points()) s.push_back(p.first);
  return s;
}

TEST(CostModel, MeasuresEveryTokenCountUpTo64AndNeverFallsWithMore) {
  ThreadPool pool(1);
  auto model = make_builtin_model();
  const CostModel m = CostModel::measure(pool, *model, 1);
  EXPECT_EQ(sizes_of(m), CostModel::measured_sizes());
  EXPECT_EQ(m.points().back().first, 64);
  for (size_t i = 1; i < m.points().size(); ++i) EXPECT_GE(m.points()[i].second, m.points()[i - 1].second);
}

// The built-in model, whose forwards stall for `stall` in calls [first, last): a shared VM's
// slow phase of a few seconds.
class StallingModel : public Model {
 public:
  StallingModel(int first, int last, std::chrono::milliseconds stall)
      : inner_(make_builtin_model()), first_(first), last_(last), stall_(stall) {}
  const ModelConfig& config() const override { return inner_->config(); }
  KvCacheShape kv_shape(int64_t num_blocks, int block_size) const override { return inner_->kv_shape(num_blocks, block_size); }
  void forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, ForwardOutput* out) override {
    if (calls_ >= first_ && calls_ < last_) std::this_thread::sleep_for(stall_);
    ++calls_;
    inner_->forward(pool, cache, batch, out);
  }
  void embed(const int* tokens, int64_t n, float* out) const override { inner_->embed(tokens, n, out); }
  const kernels::WeightView& lm_head() const override { return inner_->lm_head(); }
  const kernels::WeightView& embed_view() const override { return inner_->embed_view(); }
  void final_norm(const float* x, int64_t rows, float* out) const override { inner_->final_norm(x, rows, out); }
  size_t weight_bytes_per_token() const override { return inner_->weight_bytes_per_token(); }
  std::vector<const kernels::WeightView*> matrices() const override { return inner_->matrices(); }

 private:
  std::unique_ptr<Model> inner_;
  int first_, last_, calls_ = 0;
  std::chrono::milliseconds stall_;
};

// A slow phase of 6 forwards in a row (after the prefix's prefill) once took whole token counts
// with it, each timed in one burst of 4 passes: their medians carried the stall and the policy
// read 16 tokens as dear. Rounds over every count leave each at most one stalled pass of three.
TEST(CostModel, ASlowPhaseOfTheMachineDoesNotSetAnyTokenCount) {
  ThreadPool pool(1);
  const auto stall = std::chrono::milliseconds(200);
  StallingModel calm(0, 0, stall);
  const CostModel reference = CostModel::measure(pool, calm, 3);
  for (int first : {1, 20, 45}) {
    StallingModel model(first, first + 6, stall);
    const CostModel m = CostModel::measure(pool, model, 3);
    for (size_t i = 0; i < m.points().size(); ++i)  // sanitizer builds run the forwards slowly
      EXPECT_LT(m.points()[i].second, 2 * reference.points()[i].second + 0.1)
          << "c(" << m.points()[i].first << "), stall from call " << first;
  }
}

TEST(CostModel, SmoothingRemovesBumpsButKeepsTheTileSteps) {
  // Noise put a bump at 6 (the marginal cost of the 6th token looked 4x the next ones') and a
  // dent at 12; the 17th token opens a second row of tiles and the 33rd a second pass: steps.
  const CostModel raw({{1, 1.00}, {4, 1.04}, {5, 1.05}, {6, 1.10}, {8, 1.10}, {12, 1.10}, {16, 1.12}, {17, 1.30},
                       {20, 1.33}, {24, 1.40}, {32, 1.50}, {33, 2.00}, {48, 2.10}, {64, 2.40}});
  const CostModel m = raw.smoothed();
  ASSERT_EQ(sizes_of(m), sizes_of(raw));
  for (size_t i = 1; i < m.points().size(); ++i) {
    EXPECT_GE(m.points()[i].second, m.points()[i - 1].second);
    EXPECT_LE(m.points()[i].second, raw.points()[i].second + 1e-12) << "the hull lies under the points";
  }
  EXPECT_LT(m.target_seconds(6), 1.10);  // the bump is gone
  // Within each segment every further token costs at least what the one before did.
  auto slope = [&](int a, int b) { return (m.target_seconds(b) - m.target_seconds(a)) / (b - a); };
  EXPECT_LE(slope(4, 5), slope(5, 6) + 1e-12);
  EXPECT_LE(slope(5, 6), slope(6, 8) + 1e-12);
  EXPECT_LE(slope(8, 12), slope(12, 16) + 1e-12);
  EXPECT_DOUBLE_EQ(m.target_seconds(1), 1.00);
  EXPECT_DOUBLE_EQ(m.target_seconds(16), 1.12);
  // A hull over 1..32 would put 17..31 on the line from 16 to 32 (c(17) 1.14, c(20) 1.21), pricing
  // trees of 16-30 nodes below what they cost.
  EXPECT_DOUBLE_EQ(m.target_seconds(17), 1.30);
  EXPECT_DOUBLE_EQ(m.target_seconds(20), 1.33);
  EXPECT_DOUBLE_EQ(m.target_seconds(32), 1.50);
  EXPECT_DOUBLE_EQ(m.target_seconds(33), 2.00);  // the step to a second pass stays
  EXPECT_DOUBLE_EQ(m.target_seconds(64), 2.40);
}

TEST(CostModel, AStepOfTheKernelsOwnIsKept) {
  // A Q4_0 target on AMX-INT8 (eaglet bench --cost-curve, Intel Xeon AMX VM, 2 threads): up to 4
  // rows run one VNNI tile, the 5th opens a second; tiles take over at 16.
  const CostModel raw({{1, 1.00}, {2, 1.04}, {3, 1.11}, {4, 1.18}, {5, 1.53}, {6, 1.67}, {8, 1.88}, {10, 2.38},
                       {12, 2.58}, {16, 2.58}, {17, 3.14}, {20, 3.47}, {32, 4.25}, {33, 4.93}, {64, 7.63}});
  EXPECT_EQ(raw.row_steps(), (std::vector<int>{4, 16, 32}));
  const CostModel m = raw.smoothed();
  // A hull over 1..16 put c(5) at 1.30 and c(8) at 1.65.
  EXPECT_DOUBLE_EQ(m.target_seconds(4), 1.18);
  EXPECT_DOUBLE_EQ(m.target_seconds(5), 1.53);
  EXPECT_GE(m.target_seconds(8), 1.80);
  EXPECT_LE(m.target_seconds(8), 1.88);
  // Linear (compute-bound, AVX2) and noisy memory-bound curves have no steps but the tiles'.
  const CostModel linear({{1, 1.0}, {2, 1.3}, {3, 1.75}, {4, 2.17}, {5, 2.6}, {6, 3.1}, {8, 3.96}, {16, 8.45}});
  EXPECT_EQ(linear.row_steps(), (std::vector<int>{16, 32}));
  const CostModel noisy({{1, 1.00}, {2, 1.01}, {3, 1.02}, {4, 1.04}, {5, 1.09}, {6, 1.08}, {8, 1.10}, {16, 1.15}});
  EXPECT_EQ(noisy.row_steps(), (std::vector<int>{16, 32}));
}

TEST(CostModel, ACachedTableOfOtherTokenCountsIsMeasuredAgain) {
  // A table cached by a version that measured only up to 32 tokens would hide the cost of 33 and
  // more (the AMX tile pass step): it is measured again, over this version's sizes, and stored.
  EAGLET_REQUIRE_SHARED();
  ThreadPool pool(1);
  auto model = load_model(test::shared_dir() + "/models/stories260K-hf");
  test::TempDir dir;
  const std::string cache = dir.file("cost_model.json");
  // Real costs, so only the token counts differ from a table this version would keep.
  nlohmann::json old = nlohmann::json::array();
  const CostModel measured = CostModel::measure(pool, *model, 3, {1, 2, 4, 8, 16, 32});
  for (auto& [n, s] : measured.points()) old.push_back({n, s});
  {
    std::ofstream(cache) << nlohmann::json{{CostModel::key(*model, pool.size()), old}}.dump();
  }
  const CostModel m = CostModel::for_target(pool, *model, cache);
  EXPECT_EQ(sizes_of(m), CostModel::measured_sizes());
  std::ifstream in(cache);
  const auto stored = nlohmann::json::parse(in).at(CostModel::key(*model, pool.size()));
  ASSERT_EQ(stored.size(), CostModel::measured_sizes().size());
  EXPECT_EQ(stored.back().at(0).get<int>(), 64);
}

}  // namespace
}  // namespace eaglet
