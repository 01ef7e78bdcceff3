// The trainer tests' small end-to-end setup: a tiny random target and a text file, plus the
// overrides of a fast recipe (as key=value strings, for TrainConfig::load and for `eaglet train`).
#pragma once
#include <string>
#include <vector>

#include "support/test_util.h"
#include "train/train_config.h"

namespace eaglet {
class Eagle3Draft;
class Model;
}

namespace eaglet {

struct TrainFixture {
  test::TempDir dir;
  std::string target, data;
  TrainFixture();
  // The recipe for output directory `out`, then `extra`.
  std::vector<std::string> overrides(const std::string& out, std::vector<std::string> extra = {}) const;
  TrainConfig config(const std::string& out, std::vector<std::string> extra = {}) const;
  // `eaglet train` with the same recipe, as a shell command.
  std::string command(const std::string& out, std::vector<std::string> extra = {}) const;
};

// The fixture's recipe as a DFlash draft (2 layers, block 8, taps of target layers 0 and 2), then `extra`.
std::vector<std::string> dflash_recipe(std::vector<std::string> extra = {});

// The engine's draft on `draft_dir` gives the training module's logits and fed-back states (to
// 1e-4 of their largest value) for one step over a few tokens.
void expect_engine_matches_module(const std::string& draft_dir, const Model& target, const Eagle3Draft& draft);

}  // namespace eaglet
