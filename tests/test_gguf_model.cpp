// GGUF models: a Hugging Face checkpoint converted the way llama.cpp's converter lays it out
// (tests/support/gguf_writer.*) loads to the same model: bitwise the same logits in F32, and in
// Q8_0 / Q4_0 bitwise the same as the safetensors model quantised on load (one quantiser). Bad
// files fail naming the file, tensor or field.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "models/gguf_weights.h"
#include "tokenizer/tokenizer.h"
#include "support/gguf_writer.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

std::vector<float> logits(Model& m) {
  KvCache cache(m.kv_shape(8));
  const SeqId s = cache.create();
  auto out = prefill(test::pool(), m, cache, s, {1, 5, 9, 14, 3, 27}, 4);  // two chunks
  ForwardBatch b;
  b.chunks.push_back({s, {11, 2}, {0, 1}});
  ForwardOutput o;
  m.forward(test::pool(), cache, b, &o);
  out.insert(out.end(), o.logits.begin(), o.logits.end());
  return out;
}

test::TinyModelSpec spec_for(const std::string& arch) {
  test::TinyModelSpec s;
  s.architecture = arch;
  s.hidden = 64;  // whole 32-weight blocks everywhere
  s.intermediate = 96;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  return s;
}

class GgufModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufModel, LoadsAsTheSameModelInF32Q8_0AndQ4_0) {
  test::TempDir d;
  test::write_tiny_model(d.file("hf"), spec_for(GetParam()));
  auto hf = load_model(d.file("hf"));
  test::write_gguf_from_hf(d.file("hf"), d.file("f32.gguf"), kernels::GgmlType::F32);
  auto g = load_model(d.file("f32.gguf"));
  EXPECT_EQ(g->config().architecture, GetParam());
  EXPECT_EQ(logits(*g), logits(*hf));
  for (auto [type, scheme] : {std::pair{kernels::GgmlType::Q8_0, kernels::QuantScheme::Q8_0},
                              std::pair{kernels::GgmlType::Q4_0, kernels::QuantScheme::Q4_0}}) {
    const std::string f = d.file(std::to_string(int(type)) + ".gguf");
    test::write_gguf_from_hf(d.file("hf"), f, type);
    auto q = load_model(f);
    auto hq = load_model(d.file("hf"));
    hq->quantize_weights(scheme);
    EXPECT_EQ(logits(*q), logits(*hq)) << f;
    EXPECT_NE(logits(*q), logits(*hf)) << f;  // it did quantise
  }
}

// Blocks interleaved at load give their pages of the file back at once (a Q4_0 file is not held
// twice), a released tensor is not handed out again, and nothing reads the released bytes: a file
// read into memory reads zeros there, yet gives the logits of the mapped file.
TEST(GgufModel, InterleavedBlocksGiveTheirFileMemoryBack) {
  test::TempDir d;
  test::TinyModelSpec spec = spec_for("llama");
  spec.intermediate = 1024;  // Q4_0 matrices spanning whole pages
  test::write_tiny_model(d.file("hf"), spec);
  test::write_gguf_from_hf(d.file("hf"), d.file("q4.gguf"), kernels::GgmlType::Q4_0);
  auto file = std::make_shared<const GgufFile>(d.file("q4.gguf"));
  WeightStore store;
  GgufWeights w(file, &store);
  const std::string gate = "blk.0.ffn_gate.weight";
  const kernels::WeightView v = w.matrix(gate, spec.intermediate, spec.hidden);
  if (v.data == file->get(gate).data) GTEST_SKIP() << "the active kernels read Q4_0 blocks in place (nothing copied)";
  EXPECT_GE(store.released_bytes(), 4096u);
  test::expect_mentions(test::error_of([&] { w.matrix(gate, spec.intermediate, spec.hidden); }), {gate, "released"});

  const std::vector<float> mapped = logits(*load_model(d.file("q4.gguf")));
  MappedFile::set_read_into_memory(true);
  struct Restore {
    ~Restore() { MappedFile::set_read_into_memory(false); }
  } restore;
  EXPECT_EQ(logits(*load_model(d.file("q4.gguf"))), mapped);
}

// A GGUF file carrying its own tokenizer (llama.cpp's SentencePiece test vocabulary) runs through
// the command line like a model directory.
TEST(GgufModelCli, FileWithItsTokenizerGeneratesThroughTheCommandLine) {
  EAGLET_REQUIRE_SHARED();
  const GgufFile vocab(test::shared_dir() + "/tokenizers/llamacpp_vocab/ggml-vocab-llama-spm.gguf");
  test::TempDir d;
  test::TinyModelSpec s = spec_for("LlamaForCausalLM");
  s.vocab = int(vocab.metadata()["tokenizer.ggml.tokens"].size());
  test::write_tiny_model(d.file("hf"), s);
  test::write_gguf_from_hf(d.file("hf"), d.file("bare.gguf"), kernels::GgmlType::Q8_0);
  const GgufFile bare(d.file("bare.gguf"));
  nlohmann::json meta = bare.metadata();
  for (auto& [k, v] : vocab.metadata().items())
    if (k.rfind("tokenizer.", 0) == 0) meta[k] = v;
  std::vector<test::GgufTensorToWrite> ts;
  for (const auto& t : bare.tensors())
    ts.push_back({t.name, kernels::GgmlType(t.type), t.dims, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
  const std::string model = d.file("model.gguf");
  test::write_gguf(model, meta, ts);
  const auto r = test::run_command(test::eaglet_binary() + " generate -m " + model +
                                   " -p 'Hello world' -n 6 --temperature 0 --ignore-eos --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["token_ids"].size(), 6u);
  EXPECT_EQ(j["prompt_token_ids"], nlohmann::json(Tokenizer::from_gguf(model).encode("Hello world")));
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufModel,
                         ::testing::Values("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"));

TEST(GgufModelErrors, BadFilesAreNamed) {
  test::TempDir d;
  test::write_tiny_model(d.file("hf"), spec_for("LlamaForCausalLM"));
  const std::string good = d.file("good.gguf");
  test::write_gguf_from_hf(d.file("hf"), good, kernels::GgmlType::Q8_0);
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  const std::string cut = d.file("cut.gguf");
  test::write_text(cut, bytes.substr(0, bytes.size() - 100));
  test::expect_mentions(test::error_of([&] { load_model(cut); }), {cut, "blk.2.ffn_norm.weight", "past the end"});

  const std::string t = d.file("t.gguf");
  auto vec = [](int64_t n) { return std::string(size_t(n) * 4, '\0'); };
  test::write_gguf(t, {{"general.architecture", "mamba"}}, {{"x", kernels::GgmlType::F32, {4}, vec(4)}});
  test::expect_mentions(test::error_of([&] { load_model(t); }), {t, "mamba", "llama"});
  test::write_gguf(t, {{"general.architecture", "llama"}}, {{"token_embd.weight", kernels::GgmlType::F32, {8, 4}, vec(32)}});
  test::expect_mentions(test::error_of([&] { load_model(t); }), {t, "llama.embedding_length", "missing"});
  test::write_gguf(t, {}, {{"w", kernels::GgmlType(13), {256}, std::string(176, '\0')}});  // Q5_K
  const GgufFile q5(t);
  EXPECT_EQ(q5.tensors()[0].nbytes, 176u);
  test::write_gguf(t, {}, {{"w", kernels::GgmlType::Q8_0, {40}, std::string(68, '\0')}});
  test::expect_mentions(test::error_of([&] { GgufFile f(t); }), {t, "'w'", "Q8_0", "40", "32"});
  test::write_gguf(t, {}, {{"w", kernels::GgmlType(99), {4}, vec(4)}});
  test::expect_mentions(test::error_of([&] { GgufFile f(t); }), {t, "'w'", "unknown GGUF type 99"});
  test::write_gguf(t, {{"general.alignment", 24}}, {{"w", kernels::GgmlType::F32, {4}, vec(4)}});
  test::expect_mentions(test::error_of([&] { GgufFile f(t); }), {t, "general.alignment", "power of two"});
  test::write_gguf(t, {}, {{"w", kernels::GgmlType::F32, {4}, vec(4)}, {"w", kernels::GgmlType::F32, {4}, vec(4)}});
  test::expect_mentions(test::error_of([&] { GgufFile f(t); }), {t, "'w'", "twice"});
}

TEST(GgufModelErrors, UnsupportedTypesAndWrongShapesNameTheTensor) {
  test::TempDir d;
  test::write_tiny_model(d.file("hf"), spec_for("Qwen2ForCausalLM"));
  const std::string g = d.file("m.gguf");
  test::write_gguf_from_hf(d.file("hf"), g, kernels::GgmlType::F32);
  // The same file with one tensor changed: Q5_0 (known to ggml, not decoded here), then transposed.
  GgufFile f(g);
  auto rewrite = [&](const std::function<void(test::GgufTensorToWrite&)>& change) {
    std::vector<test::GgufTensorToWrite> ts;
    for (const auto& t : f.tensors()) {
      ts.push_back({t.name, kernels::GgmlType(t.type), t.dims, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
      if (t.name == "blk.1.ffn_up.weight") change(ts.back());
    }
    const std::string out = d.file("bad.gguf");
    test::write_gguf(out, f.metadata(), ts);
    return out;
  };
  std::string bad = rewrite([](test::GgufTensorToWrite& t) {
    t.type = kernels::GgmlType(6);
    t.bytes.resize(size_t(t.dims[0] / 32 * t.dims[1]) * 22);
  });
  test::expect_mentions(test::error_of([&] { load_model(bad); }), {bad, "blk.1.ffn_up.weight", "Q5_0", "Q4_K"});
  bad = rewrite([](test::GgufTensorToWrite& t) { std::swap(t.dims[0], t.dims[1]); });
  test::expect_mentions(test::error_of([&] { load_model(bad); }), {bad, "blk.1.ffn_up.weight", "GGUF shape [96, 64]", "[64, 96]"});
}

}  // namespace
}  // namespace eaglet
