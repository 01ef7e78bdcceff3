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

std::vector<std::vector<int>> byte_prompts(int n, int len) {
  std::vector<std::vector<int>> out;
  for (int p = 0; p < n; ++p) {
    std::vector<int> t;
    for (int i = 0; i < len + p * 7; ++i) t.push_back((i * (31 + 2 * p) + 5 * p + 3) % 256);
    out.push_back(t);
  }
  return out;
}

}  // namespace eaglet::test
