// The real `eaglet` binary end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

std::vector<int> reference_ids() {
  std::string text = read_text_file(test::shared_dir() + "/models/stories260K/reference_greedy.txt");
  const size_t at = text.find("ALL_IDS: ");
  std::istringstream ss(text.substr(at + 9, text.find('\n', at) - at - 9));
  std::vector<int> ids;
  int v;
  while (ss >> v) ids.push_back(v);
  return ids;
}

nlohmann::json generate_json(const std::string& model, const std::string& extra = "") {
  auto r = test::run_command(test::eaglet_binary() + " generate -m " + model +
                             " -p 'Once upon a time' -n 64 --temperature 0 --json " + extra + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

void expect_reference(const nlohmann::json& j) {
  std::vector<int> got = j["prompt_token_ids"].get<std::vector<int>>();
  for (int t : j["token_ids"]) got.push_back(t);
  const auto ref = reference_ids();  // llama2.c's 64 steps include the 5 prompt tokens
  ASSERT_GE(got.size(), ref.size());
  EXPECT_EQ(std::vector<int>(got.begin(), got.begin() + long(ref.size())), ref);
}

TEST(Cli, Stories260KReproducesLlama2cGreedy) {
  EAGLET_REQUIRE_SHARED();
  auto j = generate_json(test::shared_dir() + "/models/stories260K-hf");
  expect_reference(j);
  EXPECT_EQ(j["token_ids"].size(), 64u);
  EXPECT_EQ(j["text"].get<std::string>().rfind(", there was a little girl named Lily.", 0), 0u);
  EXPECT_GT(j["stats"]["decode_tokens_per_second"].get<double>(), 0.0);
}

TEST(Cli, Stories260KInBf16) {
  EAGLET_REQUIRE_SHARED();
  // Convert the checkpoint to BF16 (round to nearest even) next to a copy of its other files.
  const std::string src = test::shared_dir() + "/models/stories260K-hf";
  test::TempDir dir;
  for (auto f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    std::filesystem::copy_file(src + "/" + f, dir.file(f));
  Checkpoint ck = Checkpoint::open_dir(src);
  std::vector<TensorToWrite> ts;
  for (auto& n : ck.names()) {
    const TensorInfo& t = ck.get(n);
    std::vector<float> v(reinterpret_cast<const float*>(t.data), reinterpret_cast<const float*>(t.data) + t.numel());
    ts.push_back({n, DType::BF16, t.shape, test::float_bytes(v, DType::BF16)});
  }
  write_safetensors(dir.file("model.safetensors"), ts);
  // Every kernel path gives the reference tokens in BF16 too.
  for (const char* isa : {"scalar", "avx2", "avx512", "avx512bf16"}) {
    auto r = test::run_command("EAGLET_ISA=" + std::string(isa) + " " + test::eaglet_binary() + " generate -m " +
                               dir.path() + " -p 'Once upon a time' -n 64 --temperature 0 --json 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0);
    expect_reference(nlohmann::json::parse(r.output));
  }
}

TEST(Cli, BuiltInModelRunsWithoutArguments) {
  auto r = test::run_command(test::eaglet_binary() + " generate -n 8 --json 2>&1 >/dev/null");
  EXPECT_NE(r.output.find("RANDOM weights"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " generate -n 8 --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.output);
  EXPECT_LE(j["token_ids"].size(), 8u);
}

TEST(Cli, BadModelDirectoryIsOneLineError) {
  test::TempDir dir;
  test::write_text(dir.file("config.json"), R"({"architectures": ["Nope"]})");
  auto r = test::run_command(test::eaglet_binary() + " generate -m " + dir.path() + " 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unknown architecture 'Nope'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace eaglet
