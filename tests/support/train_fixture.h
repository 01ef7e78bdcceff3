// The trainer tests' small end-to-end setup: a tiny random target and a text file, plus the
// overrides of a fast recipe (as key=value strings, for TrainConfig::load and for `eaglet train`).
#pragma once
#include <string>
#include <vector>

#include "support/test_util.h"
#include "train/train_config.h"

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

}  // namespace eaglet
