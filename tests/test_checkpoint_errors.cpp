// Malformed checkpoints give one-line errors naming the file and the tensor or field at fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

std::string load_error(const std::string& dir) {
  try {
    load_model(dir);
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "error is not one line: " << msg;
    return msg;
  }
  return "<no error>";
}

void expect_contains(const std::string& s, const std::string& part) {
  EXPECT_NE(s.find(part), std::string::npos) << "'" << s << "' does not mention '" << part << "'";
}

TEST(CheckpointErrors, TruncatedSafetensors) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), {});
  const std::string f = dir.file("model.safetensors");
  std::filesystem::resize_file(f, std::filesystem::file_size(f) - 100);
  const std::string e = load_error(dir.path());
  expect_contains(e, "model.safetensors");
  expect_contains(e, "truncated");
  std::filesystem::resize_file(f, 5);
  expect_contains(load_error(dir.path()), "truncated");
}

TEST(CheckpointErrors, MissingTensor) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), {});
  Checkpoint ck = Checkpoint::open_dir(dir.path());
  std::vector<TensorToWrite> keep;
  for (auto& n : ck.names()) {
    if (n == "model.layers.1.mlp.up_proj.weight") continue;
    const TensorInfo& t = ck.get(n);
    keep.push_back({n, t.dtype, t.shape, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
  }
  test::TempDir out;
  std::filesystem::copy_file(dir.file("config.json"), out.file("config.json"));
  write_safetensors(out.file("model.safetensors"), keep);
  const std::string e = load_error(out.path());
  expect_contains(e, "missing tensor 'model.layers.1.mlp.up_proj.weight'");
}

TEST(CheckpointErrors, WrongShape) {
  test::TempDir dir;
  test::TinyModelSpec s;
  test::write_tiny_model(dir.path(), s);
  auto cfg = nlohmann::json::parse(read_text_file(dir.file("config.json")));
  cfg["intermediate_size"] = 80;  // tensors were written with 72
  test::write_text(dir.file("config.json"), cfg.dump());
  const std::string e = load_error(dir.path());
  expect_contains(e, "model.layers.0.mlp.gate_proj.weight");
  expect_contains(e, "has shape [72, 48], expected [80, 48]");
}

TEST(CheckpointErrors, UnknownArchitectureAndBadConfig) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), {});
  auto cfg = nlohmann::json::parse(read_text_file(dir.file("config.json")));
  cfg["architectures"] = {"GPTNeoXForCausalLM"};
  test::write_text(dir.file("config.json"), cfg.dump());
  std::string e = load_error(dir.path());
  expect_contains(e, "unknown architecture 'GPTNeoXForCausalLM'");
  expect_contains(e, "LlamaForCausalLM");

  test::write_text(dir.file("config.json"), "{\"architectures\": [\"LlamaForCausalLM\"], ");
  expect_contains(load_error(dir.path()), "config.json: bad JSON");

  cfg["architectures"] = {"LlamaForCausalLM"};
  cfg.erase("hidden_size");
  test::write_text(dir.file("config.json"), cfg.dump());
  expect_contains(load_error(dir.path()), "missing field 'hidden_size'");

  cfg["hidden_size"] = "48";
  test::write_text(dir.file("config.json"), cfg.dump());
  expect_contains(load_error(dir.path()), "field 'hidden_size' must be an integer");
  expect_contains(load_error(dir.path() + "/nope"), "not found");
}

TEST(CheckpointErrors, WrongDtypeAndBadHeader) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), {});
  Checkpoint ck = Checkpoint::open_dir(dir.path());
  std::vector<TensorToWrite> ts;
  for (auto& n : ck.names()) {
    const TensorInfo& t = ck.get(n);
    TensorToWrite w{n, t.dtype, t.shape, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)};
    if (n == "model.norm.weight") {  // same bytes, reinterpreted as I32
      w.dtype = DType::I32;
    }
    ts.push_back(w);
  }
  write_safetensors(dir.file("model.safetensors"), ts);
  std::string e = load_error(dir.path());
  expect_contains(e, "'model.norm.weight' has unsupported dtype I32");

  // A header whose byte count does not match the shape.
  std::string bytes = read_text_file(dir.file("model.safetensors"));
  test::write_text(dir.file("model.safetensors"), std::string("\x08\0\0\0\0\0\0\0{\"a\":1} ", 16));
  expect_contains(load_error(dir.path()), "malformed header entry");
}

// A shape whose element count overflows 64 bits was multiplied out with wrap-around (undefined
// behaviour, found by fuzz_safetensors) and could pass for a small tensor; now it is named.
TEST(CheckpointErrors, ShapeTooLargeToCount) {
  test::TempDir dir;
  auto write = [&](const std::string& shape) {
    const std::string header = R"({"w": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": [0, 64]}})";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
    test::write_text(dir.file("x.safetensors"), file + header + std::string(64, '\0'));
    return test::error_of([&] { SafetensorsFile f(dir.file("x.safetensors")); });
  };
  test::expect_mentions(write("[2222222222222222222, 32]"), {"x.safetensors", "'w'", "2^63 elements"});
  // 2^61 elements fit; 2^63 bytes of F32 do not.
  test::expect_mentions(write("[2305843009213693952]"), {"x.safetensors", "'w'", "2^63 bytes"});
  EXPECT_EQ(write("[4, 4]"), "<no error>");  // 16 F32 are the 64 bytes given
}

TEST(CheckpointErrors, ShardedIndexIsFollowed) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), {});
  Checkpoint ck = Checkpoint::open_dir(dir.path());
  std::vector<TensorToWrite> a, b;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (auto& n : ck.names()) {
    const TensorInfo& t = ck.get(n);
    (i++ % 2 ? a : b).push_back({n, t.dtype, t.shape, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
    index["weight_map"][n] = (i % 2 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors");
  }
  test::TempDir sharded;
  std::filesystem::copy_file(dir.file("config.json"), sharded.file("config.json"));
  write_safetensors(sharded.file("model-00001-of-00002.safetensors"), b);
  write_safetensors(sharded.file("model-00002-of-00002.safetensors"), a);
  test::write_text(sharded.file("model.safetensors.index.json"), index.dump());
  auto m1 = load_model(dir.path());
  auto m2 = load_model(sharded.path());
  EXPECT_EQ(m1->weight_bytes_per_token(), m2->weight_bytes_per_token());
  // An index naming a tensor its shard lacks is an error naming both.
  index["weight_map"]["extra.weight"] = "model-00001-of-00002.safetensors";
  test::write_text(sharded.file("model.safetensors.index.json"), index.dump());
  expect_contains(load_error(sharded.path()), "tensor 'extra.weight' listed in the index is missing");
}

}  // namespace
}  // namespace eaglet
