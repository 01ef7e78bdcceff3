#include "support/minimax_fixture.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_util.h"

namespace eaglet::test {

void write_synthetic_minimax(const std::string& dir, const std::string& variant, const std::string& quant, int seed) {
  std::filesystem::remove_all(dir);
  const auto r = run_command("/usr/bin/python3 " + source_dir() + "/tools/make_synthetic_minimax.py " + dir +
                             " --variant " + variant + " --quant " + quant + " --seed " + std::to_string(seed) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace eaglet::test
