#include "support/reference_runner.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/test_util.h"

namespace eaglet::test {

ReferenceOutput run_reference_script(const std::string& script, const std::string& model_dir,
                                     const std::vector<int>& tokens, const std::vector<int>& taps, int vocab,
                                     int hidden, const std::string& scratch_dir) {
  std::string toks, tp;
  for (int t : tokens) toks += (toks.empty() ? "" : ",") + std::to_string(t);
  for (int t : taps) tp += (tp.empty() ? "" : ",") + std::to_string(t);
  ReferenceOutput ref;
  ref.out_path = scratch_dir + "/ref.bin";
  auto r = run_command("/usr/bin/python3 " + source_dir() + "/tests/reference/" + script + " " + model_dir + " " +
                       ref.out_path + " " + toks + " " + (tp.empty() ? "-" : tp) + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ref.logits.resize(tokens.size() * size_t(vocab));
  ref.taps.resize(tokens.size() * taps.size() * size_t(hidden));
  std::ifstream in(ref.out_path, std::ios::binary);
  in.read(reinterpret_cast<char*>(ref.logits.data()), std::streamsize(ref.logits.size() * 4));
  in.read(reinterpret_cast<char*>(ref.taps.data()), std::streamsize(ref.taps.size() * 4));
  EXPECT_TRUE(bool(in)) << script << " output too short";
  return ref;
}

}  // namespace eaglet::test
