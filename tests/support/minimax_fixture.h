// Synthetic MiniMax checkpoints for tests, written by the repository's generator
// (tools/make_synthetic_minimax.py, needs /usr/bin/python3 with numpy).
#pragma once
#include <string>

namespace eaglet::test {

// variant: m3 | m3-vl | m2; quant: bf16 | fp8 | mxfp8 (the "small" preset). Fails the test on error.
void write_synthetic_minimax(const std::string& dir, const std::string& variant, const std::string& quant,
                             int seed = 0);

}  // namespace eaglet::test
