// What a target forward costs, measured: seconds for one forward over n tokens, n = 1..64, on
// this machine, model, thread count and ISA. On a memory-bound target the first few tokens ride
// on the weight stream almost for free and the curve turns linear once arithmetic dominates; the
// draft policy reads it to decide how many draft tokens a step can afford.
//
// Measuring takes a few seconds on a 1B model, so the table is cached per model, threads and ISA
// in $XDG_CACHE_HOME/eaglet/cost_model.json (~/.cache when unset). A cached table is checked at
// start against a quick c(1), c(4) and measured again when it no longer holds (new kernels, a
// different machine behind the same name, a VM whose bandwidth moved).
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace eaglet {

class CostModel {
 public:
  // Token counts measured (those the target's context holds after a 64-token prefix); beyond the
  // last the cost is extrapolated linearly.
  static const std::vector<int>& measured_sizes();
  // Loads the table for this target from `cache_path` ("" = the default file, "off" = none) or
  // measures it there and then (and stores it); returns it smoothed().
  // Forwards run on `pool`, the pool the engine will run them on.
  static CostModel for_target(ThreadPool& pool, Model& target, const std::string& cache_path = "");
  static CostModel measure(ThreadPool& pool, Model& target, int reps = 3,
                           const std::vector<int>& sizes = measured_sizes());
  explicit CostModel(std::vector<std::pair<int, double>> points);

  // The curve the draft policy reads: the lower convex hull of the points between tile-row steps
  // (up to 16 tokens, 17..32, beyond), each evaluated at the measured counts. Timing noise makes
  // dents and bumps of a few percent (c(5) 1.04, c(6) 1.08, c(8) 1.08), and a bump reads as a
  // token that costs more than the next ones: the policy then stopped trees at 5 nodes, and the
  // next draft one level shallower, step after step. On the hull each further token costs at
  // least what the previous one did. The steps are real and stay: the 17th row opens a second
  // row of 16-row tiles (AMX, AVX-512 BF16), the 33rd a second pass; a hull across them priced
  // 17..31-token trees below their cost. Kernels without such steps (AVX2) lose nothing by it.
  // Steps a kernel has elsewhere are found in the points: the VNNI kernel's tiles of 4 rows made
  // c(5) 1.53 against c(4) 1.18 on a Q4_0 target (Intel Xeon AMX VM, 2 threads), and a hull over
  // 1..16 priced 5..12-token trees ~0.2 of a step below their cost, so auto drafted 4.2 nodes a
  // step and lost to a chain of 3 (64 against 73 tok/s).
  CostModel smoothed() const;
  static constexpr std::array<int, 2> kTileRowSteps{16, 32};  // a step lies after each
  // A measured count n is also a step when token n + 1 costs at least kStepJump of a one-token
  // forward and kStepOverNeighbours times what the tokens measured beside it cost (noise moves
  // single counts by a few percent of c(1); a linear, compute-bound curve has no steps).
  static constexpr double kStepJump = 0.1, kStepOverNeighbours = 2.0;
  // kTileRowSteps and the steps found in the points, ascending.
  std::vector<int> row_steps() const;
  // Seconds of one target forward over n tokens in total (n >= 1).
  double target_seconds(int n) const;
  // c(n) / c(1).
  double ratio(int n) const { return target_seconds(n) / target_seconds(1); }
  const std::vector<std::pair<int, double>>& points() const { return points_; }
  // Cache key: model, weights dtype, threads and kernels.
  static std::string key(const Model& target, int threads);

 private:
  std::vector<std::pair<int, double>> points_;  // (tokens, seconds), ascending
};

}  // namespace eaglet
