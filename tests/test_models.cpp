// Tiny random Llama / Qwen2 / Qwen3 checkpoints against an independent numpy forward pass
// (tests/reference/decoder_ref.py), logits and hidden-state taps, through chunked prefill and
// single-token decode over the paged KV cache.
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "engine/generator.h"
#include "io/mapped_file.h"
#include "models/model.h"
#include "support/reference_runner.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

struct Reference {
  std::vector<float> logits, taps;
};

Reference run_reference(const std::string& dir, const std::vector<int>& tokens, const std::vector<int>& taps,
                        int vocab, int hidden) {
  test::TempDir tmp;
  auto r = test::run_reference_script("decoder_ref.py", dir, tokens, taps, vocab, hidden, tmp.path());
  return Reference{std::move(r.logits), std::move(r.taps)};
}

void expect_rel_close(const float* got, const float* want, size_t n, double tol, const std::string& what) {
  double max_abs = 0;
  for (size_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(double(want[i])));
  for (size_t i = 0; i < n; ++i)
    ASSERT_LE(std::fabs(double(got[i]) - want[i]), tol * max_abs) << what << " element " << i << " got " << got[i]
                                                                   << " want " << want[i];
}

class DecoderVsReference : public ::testing::TestWithParam<test::TinyModelSpec> {};

TEST_P(DecoderVsReference, LogitsAndTapsMatch) {
  if (!test::python_numpy_available()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy (apt: python3-numpy)";
  const test::TinyModelSpec spec = GetParam();
  test::TempDir dir;
  test::write_tiny_model(dir.path(), spec);
  auto model = load_model(dir.path());
  const int V = spec.vocab, H = spec.hidden, L = spec.layers;
  std::vector<int> tokens;
  for (int i = 0; i < 41; ++i) tokens.push_back((i * 37 + 11) % V);
  const std::vector<int> taps = {0, 2, L};
  Reference ref = run_reference(dir.path(), tokens, taps, V, H);

  // 25 tokens prefilled in chunks of 10 (all logits), then 16 single-token decode steps.
  KvCache cache(model->kv_shape(8, 16));
  SeqId seq = cache.create();
  std::vector<float> logits, tapped;
  size_t pos = 0;
  auto step = [&](size_t n) {
    ForwardBatch b;
    SeqChunk c{seq, std::vector<int>(tokens.begin() + long(pos), tokens.begin() + long(pos + n)), {}};
    for (size_t i = 0; i < n; ++i) c.logit_rows.push_back(int(i));
    b.chunks.push_back(c);
    b.tap_layers = taps;
    ForwardOutput out;
    model->forward(test::pool(), cache, b, &out);
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
    tapped.insert(tapped.end(), out.taps.begin(), out.taps.end());
    pos += n;
  };
  step(10), step(10), step(5);
  while (pos < tokens.size()) step(1);
  const double tol = spec.dtype == DType::F32 ? 1e-4 : 2e-2;
  expect_rel_close(logits.data(), ref.logits.data(), ref.logits.size(), tol, spec.architecture + " logits");
  expect_rel_close(tapped.data(), ref.taps.data(), ref.taps.size(), tol, spec.architecture + " taps");
}

test::TinyModelSpec spec(const std::string& arch, bool llama3 = false, bool tie = false, DType dt = DType::F32) {
  test::TinyModelSpec s;
  s.architecture = arch;
  s.llama3_rope = llama3;
  s.tie_embeddings = tie;
  s.dtype = dt;
  return s;
}

INSTANTIATE_TEST_SUITE_P(Architectures, DecoderVsReference,
                         ::testing::Values(spec("LlamaForCausalLM"), spec("LlamaForCausalLM", true, false),
                                           spec("LlamaForCausalLM", false, true), spec("Qwen2ForCausalLM"),
                                           spec("Qwen3ForCausalLM"), spec("Qwen3ForCausalLM", false, false, DType::BF16)),
                         [](const auto& info) {
                           const auto& s = info.param;
                           return s.architecture.substr(0, 5) + (s.llama3_rope ? "_llama3rope" : "") +
                                  (s.tie_embeddings ? "_tied" : "") + (s.dtype == DType::BF16 ? "_bf16" : "_f32");
                         });

TEST(Decoder, BatchedSequencesEqualSeparateRuns) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), test::TinyModelSpec{});
  auto model = load_model(dir.path());
  const std::vector<int> a = {1, 5, 9, 33, 2, 7}, b = {1, 80, 3};
  auto run_alone = [&](const std::vector<int>& toks) {
    KvCache cache(model->kv_shape(4, 16));
    SeqId s = cache.create();
    return prefill(test::pool(), *model, cache, s, toks, 512);
  };
  KvCache cache(model->kv_shape(8, 16));
  SeqId sa = cache.create(), sb = cache.create();
  ForwardBatch batch;
  batch.chunks = {SeqChunk{sa, a, {int(a.size()) - 1}}, SeqChunk{sb, b, {int(b.size()) - 1}}};
  ForwardOutput out;
  model->forward(test::pool(), cache, batch, &out);
  const int V = model->config().vocab;
  auto la = run_alone(a), lb = run_alone(b);
  EXPECT_EQ(std::vector<float>(out.logits.begin(), out.logits.begin() + V), la);
  EXPECT_EQ(std::vector<float>(out.logits.begin() + V, out.logits.end()), lb);
}

TEST(Decoder, FullCacheFailsCleanly) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), test::TinyModelSpec{});
  auto model = load_model(dir.path());
  KvCache cache(model->kv_shape(2, 16));
  SeqId s = cache.create();
  std::vector<int> toks(20, 5);
  ForwardOutput out;
  ForwardBatch batch;
  batch.chunks = {SeqChunk{s, toks, {}}};
  model->forward(test::pool(), cache, batch, &out);
  batch.chunks = {SeqChunk{s, std::vector<int>(20, 6), {}}};
  EXPECT_THROW(model->forward(test::pool(), cache, batch, &out), Error);
  EXPECT_EQ(cache.length(s), 20);  // unchanged
}

TEST(Decoder, ContextLengthIsEnforced) {
  test::TempDir dir;
  test::TinyModelSpec s;
  s.max_position = 16;
  test::write_tiny_model(dir.path(), s);
  auto model = load_model(dir.path());
  KvCache cache(model->kv_shape(4, 16));
  SeqId seq = cache.create();
  ForwardBatch batch;
  batch.chunks = {SeqChunk{seq, std::vector<int>(17, 3), {}}};
  ForwardOutput out;
  try {
    model->forward(test::pool(), cache, batch, &out);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context length 16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

TEST(Decoder, ReadingWeightsIntoMemoryGivesTheSameLogits) {
  test::TempDir dir;
  test::write_tiny_model(dir.path(), test::TinyModelSpec{});
  const std::vector<int> toks = {1, 5, 9, 33, 2, 7};
  auto logits = [&] {
    auto model = load_model(dir.path());
    KvCache cache(model->kv_shape(4, 16));
    return prefill(test::pool(), *model, cache, cache.create(), toks, 512);
  };
  const auto mapped = logits();
  MappedFile::set_read_into_memory(true);
  const auto read = logits();
  MappedFile::set_read_into_memory(false);
  EXPECT_EQ(mapped, read);
}

TEST(Decoder, WeightsReadIntoMemoryStartOnPageBoundaries) {
  // Safetensors aligns tensor data to 8 bytes only; read into memory, the payload is shifted so
  // that tensors whose file offsets are multiples of 4 KB (nearly all weights) start on a page.
  test::TempDir dir;
  const std::string path = dir.path() + "/w.safetensors";
  std::vector<TensorToWrite> tensors;
  for (const char* name : {"a", "b", "c"}) {
    std::string bytes(4096, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 7 + name[0]);
    tensors.push_back({name, DType::F32, {1024}, bytes});
  }
  write_safetensors(path, tensors);
  const Checkpoint mapped = Checkpoint::open_file(path);
  MappedFile::set_read_into_memory(true);
  const Checkpoint read = Checkpoint::open_file(path);
  MappedFile::set_read_into_memory(false);
  for (const char* name : {"a", "b", "c"}) {
    const TensorInfo& t = read.get(name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % kWeightAlignment, 0u) << name;
    ASSERT_EQ(t.nbytes, mapped.get(name).nbytes);
    EXPECT_EQ(std::memcmp(t.data, mapped.get(name).data, t.nbytes), 0) << name;
  }
}

}  // namespace
}  // namespace eaglet
