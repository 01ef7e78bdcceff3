// Runs a numpy reference script of tests/reference/ (SCRIPT MODEL_DIR OUT TOKENS TAPS) and reads
// back its float32 logits [T, V] and taps [T, len(taps), H].
#pragma once
#include <string>
#include <vector>

namespace eaglet::test {

struct ReferenceOutput {
  std::vector<float> logits, taps;
  std::string out_path;  // the script's output file (scripts may write companions beside it)
};

// `scratch_dir` receives the output files.
ReferenceOutput run_reference_script(const std::string& script, const std::string& model_dir,
                                     const std::vector<int>& tokens, const std::vector<int>& taps, int vocab,
                                     int hidden, const std::string& scratch_dir);

}  // namespace eaglet::test
