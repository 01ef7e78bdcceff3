// Synthetic MiniMax checkpoints for tests, written by the repository's generator
// (tools/make_synthetic_minimax.py, needs /usr/bin/python3 with numpy).
#pragma once
#include <string>
#include <vector>

namespace eaglet::test {

// variant: m3 | m3-vl | m2; quant: bf16 | fp8 | mxfp8 (the "small" preset). Fails the test on error.
void write_synthetic_minimax(const std::string& dir, const std::string& variant, const std::string& quant,
                             int seed = 0);
// `n` prompts of byte-range token ids (the synthetic tokenizer's bytes), about `len` long, distinct.
std::vector<std::vector<int>> byte_prompts(int n, int len);

}  // namespace eaglet::test
