// Model and draft folders whose config does not match their weights, or whose files are not files
// at all, are refused at load naming the field or file (issue 28, item 9). Each of these either
// ended in "unexpected error: std::bad_alloc" naming nothing, blocked forever, or loaded and
// silently computed something else.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"
#include "models/eagle3.h"
#include "models/model.h"
#include "support/gguf_writer.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

using json = nlohmann::json;

void edit_config(const std::string& dir, const std::function<void(json&)>& f) {
  json c = json::parse(read_text_file(dir + "/config.json"));
  f(c);
  test::write_text(dir + "/config.json", c.dump(1));
}

TEST(LoaderEdges, LayerCountsMustMatchTheCheckpoint) {
  test::TempDir d;
  test::write_tiny_model(d.file("m"), {});  // 3 layers
  edit_config(d.file("m"), [](json& c) { c["num_hidden_layers"] = 2147483647; });
  const auto t0 = std::chrono::steady_clock::now();
  test::expect_mentions(test::error_of([&] { load_model(d.file("m")); }), {"num_hidden_layers = 2147483647", "holds 3 layers"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  // Fewer in the config than in the checkpoint: layer 2 was ignored and the output changed.
  edit_config(d.file("m"), [](json& c) { c["num_hidden_layers"] = 2; });
  test::expect_mentions(test::error_of([&] { load_model(d.file("m")); }), {"holds 3 layers", "num_hidden_layers = 2"});
  edit_config(d.file("m"), [](json& c) { c["num_hidden_layers"] = 3; });
  EXPECT_NO_THROW(load_model(d.file("m")));
}

TEST(LoaderEdges, GgufBlockCountMustMatchItsTensors) {
  test::TempDir d;
  test::TinyModelSpec s;
  s.hidden = 64;
  s.intermediate = 96;
  test::write_tiny_model(d.file("hf"), s);
  test::write_gguf_from_hf(d.file("hf"), d.file("m.gguf"), kernels::GgmlType::F32);
  // block_count is a UINT32 right after its key: key bytes, 4 bytes of type, 4 of value.
  std::string bytes = read_text_file(d.file("m.gguf"));
  const std::string key = "llama.block_count";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const uint32_t huge = 2147483647;
  bytes.replace(at + key.size() + 4, 4, reinterpret_cast<const char*>(&huge), 4);
  std::ofstream(d.file("big.gguf"), std::ios::binary) << bytes;
  test::expect_mentions(test::error_of([&] { load_model(d.file("big.gguf")); }),
                        {"big.gguf", "llama.block_count = 2147483647", "holds 3 layers"});
}

TEST(LoaderEdges, AttentionBiasMeansBiasTensors) {
  test::TempDir d;
  test::write_tiny_model(d.file("m"), {});
  auto plain = load_model(d.file("m"));
  // transformers' Llama reads q/k/v/o biases with attention_bias; without them it cannot load.
  edit_config(d.file("m"), [](json& c) { c["attention_bias"] = true; });
  test::expect_mentions(test::error_of([&] { load_model(d.file("m")); }), {"model.layers.0.self_attn.q_proj.bias"});
  edit_config(d.file("m"), [](json& c) { c["attention_bias"] = false; c["mlp_bias"] = true; });
  test::expect_mentions(test::error_of([&] { load_model(d.file("m")); }), {"config.json", "mlp_bias"});
}

TEST(LoaderEdges, AFifoIsNotAModelFile) {
  test::TempDir d;
  test::write_byte_vocab_target(d.file("m"));
  std::remove(d.file("m/model.safetensors").c_str());
  ASSERT_EQ(mkfifo(d.file("m/model.safetensors").c_str(), 0600), 0);
  // Opening a FIFO for reading waited for a writer forever.
  const auto r = test::run_command("timeout 60 " + test::eaglet_binary() + " generate -m " + d.file("m") + " -p hi -n 2 2>&1");
  EXPECT_NE(r.exit_code, 124) << "eaglet blocked on the FIFO";
  EXPECT_NE(r.output.find("not a regular file"), std::string::npos) << r.output;
  std::remove(d.file("m/config.json").c_str());
  ASSERT_EQ(mkfifo(d.file("m/config.json").c_str(), 0600), 0);
  test::expect_mentions(test::error_of([&] { read_text_file(d.file("m/config.json")); }), {"config.json", "not a regular file"});
}

TEST(LoaderEdges, DraftsGetTheTargetsConfigChecks) {
  test::TempDir d;
  test::write_byte_vocab_target(d.file("target"));
  auto target = load_model(d.file("target"));
  test::DraftSpec s;
  s.vocab = s.draft_vocab = 259;
  test::write_draft(d.file("draft"), s);
  EXPECT_NO_THROW(Eagle3Draft::load(d.file("draft"), *target));
  edit_config(d.file("draft"), [](json& c) { c["max_position_embeddings"] = 0; });
  test::expect_mentions(test::error_of([&] { Eagle3Draft::load(d.file("draft"), *target); }), {"max_position_embeddings"});
  edit_config(d.file("draft"), [](json& c) { c["max_position_embeddings"] = 2048; c["eagle_aux_hidden_state_layer_ids"] = json::array(); });
  // An empty list fell back to the default layers (2, L/2, L-3) without a word.
  test::expect_mentions(test::error_of([&] { Eagle3Draft::load(d.file("draft"), *target); }),
                        {"eagle_aux_hidden_state_layer_ids", "empty"});
}

}  // namespace
}  // namespace eaglet
