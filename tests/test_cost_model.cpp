// The measured forward-cost table: which token counts it holds, and when a cached one is reused.
#include <gtest/gtest.h>

#include <fstream>
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
