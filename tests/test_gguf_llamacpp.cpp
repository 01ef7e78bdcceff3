// GGUF files written by llama.cpp itself (tests/data/llamacpp, made by its convert_hf_to_gguf.py
// and llama-quantize at commit de3ff81 with tools/llamacpp/; see tests/data/llamacpp/README.md)
// against the Hugging Face checkpoints they were converted from: the same model bit for bit, and
// llama-quantize's Q8_0 / Q4_0 blocks byte for byte what eaglet's quantisers produce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/generator.h"
#include "io/gguf.h"
#include "kernels/ggml_quant.h"
#include "models/dflash.h"
#include "models/eagle3.h"
#include "support/gguf_writer.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

std::string data(const std::string& name) { return test::source_dir() + "/tests/data/llamacpp/" + name; }

std::vector<float> logits(Model& m) {
  KvCache cache(m.kv_shape(8));
  const SeqId s = cache.create();
  auto out = prefill(test::pool(), m, cache, s, {1, 5, 9, 14, 3, 27, 40, 63}, 5);
  ForwardBatch b;
  b.chunks.push_back({s, {11, 2, 7}, {0, 1, 2}});
  ForwardOutput o;
  m.forward(test::pool(), cache, b, &o);
  out.insert(out.end(), o.logits.begin(), o.logits.end());
  return out;
}

TEST(GgufFromLlamaCpp, ConvertedModelsEqualTheirCheckpointsBitwise) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    auto hf = load_model(data(arch));
    auto gguf = load_model(data(std::string(arch) + ".gguf"));
    EXPECT_EQ(gguf->config().architecture, hf->config().architecture);
    EXPECT_EQ(logits(*gguf), logits(*hf)) << arch;
  }
}

TEST(GgufFromLlamaCpp, LlamaQuantizeBlocksEqualEaglets) {
  const GgufFile f32(data("llama.gguf"));
  for (auto [file, type] : {std::pair{"llama-q8_0.gguf", kernels::GgmlType::Q8_0},
                            std::pair{"llama-q4_0.gguf", kernels::GgmlType::Q4_0}}) {
    const GgufFile q(data(file));
    int compared = 0;
    for (const GgufTensor& t : q.tensors()) {
      if (t.type != uint32_t(type)) continue;
      const GgufTensor& src = f32.get(t.name);
      ASSERT_EQ(src.type, uint32_t(kernels::GgmlType::F32)) << t.name;
      const int64_t n = src.rows() * src.cols();
      std::vector<uint8_t> mine(t.nbytes);
      const auto* x = reinterpret_cast<const float*>(src.data);
      if (type == kernels::GgmlType::Q8_0) kernels::quantize_row_q8_0(x, reinterpret_cast<kernels::BlockQ8_0*>(mine.data()), n);
      else kernels::quantize_row_q4_0(x, reinterpret_cast<kernels::BlockQ4_0*>(mine.data()), n);
      EXPECT_EQ(std::memcmp(mine.data(), t.data, t.nbytes), 0) << file << " " << t.name;
      ++compared;
    }
    EXPECT_GE(compared, 14) << file;  // every layer matrix of the 2-layer model
    auto m = load_model(data(file));
    const auto got = logits(*m), want = logits(*load_model(data("llama.gguf")));
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      num += (got[i] - want[i]) * (got[i] - want[i]);
      den += want[i] * want[i];
    }
    // Relative RMS distance of the logits from the F32 file's: 0.053 (Q8_0) and 0.42 (Q4_0) on this
    // random model, whose embedding and output matrices llama-quantize quantises too; logits
    // unrelated to the model's would be ~1.4.
    EXPECT_LT(std::sqrt(num / den), type == kernels::GgmlType::Q8_0 ? 0.15 : 0.7) << file;
  }
}

// All draft logits and next states over 5 positions and one step on the draft's own state.
std::vector<float> draft_outputs(const Eagle3Draft& d) {
  const auto& c = d.config();
  const int T = 5;
  std::vector<float> aux(size_t(T * 3 * c.target_hidden));
  for (size_t i = 0; i < aux.size(); ++i) aux[i] = std::sin(0.37f * float(i));
  KvCache cache(d.kv_shape(4, 16));
  const SeqId s = cache.create();
  std::vector<float> g(size_t(T * c.hidden)), out(g.size()), logits, step_logits, out2(size_t(c.hidden));
  d.fuse_aux(test::pool(), aux.data(), T, g.data());
  d.forward(test::pool(), cache, {Eagle3Rows{s, {3, 17, 40, 8, 61}}}, g.data(), out.data(), &logits, true);
  d.forward(test::pool(), cache, {Eagle3Rows{s, {22}}}, out.data() + (T - 1) * c.hidden, out2.data(), &step_logits);
  logits.insert(logits.end(), out.begin(), out.end());
  logits.insert(logits.end(), step_logits.begin(), step_logits.end());
  logits.insert(logits.end(), out2.begin(), out2.end());
  return logits;
}

// llama.cpp's converter on an EAGLE-3 draft (architecture eagle3): q/k permuted for its RoPE, d2t
// rewritten to absolute ids, aux ids as metadata. Loaded back, it is the checkpoint's draft.
TEST(GgufFromLlamaCpp, ConvertedEagle3DraftEqualsItsCheckpointBitwise) {
  auto target = load_model(data("llama"));
  auto hf = Eagle3Draft::load(data("llama-eagle3"), *target);
  auto gguf = Eagle3Draft::load(data("llama-eagle3.gguf"), *target);
  EXPECT_EQ(gguf->config().aux_layers, hf->config().aux_layers);
  ASSERT_EQ(gguf->config().draft_vocab, 48);
  int remapped = 0;
  for (int i = 0; i < 48; ++i) {
    EXPECT_EQ(gguf->to_target_id(i), hf->to_target_id(i)) << i;
    remapped += hf->to_target_id(i) != i;
  }
  EXPECT_GT(remapped, 0);  // the fixture's d2t is not the identity
  EXPECT_EQ(draft_outputs(*gguf), draft_outputs(*hf));
}

// llama.cpp's converter on a DFlash draft (architecture dflash; the target's vocabulary from
// --target-model-dir, target_layers written as ids + 1, hidden_norm as enc.output_norm, Qwen3
// q/k not permuted): loaded back, it drafts the checkpoint's block bit for bit.
TEST(GgufFromLlamaCpp, ConvertedDFlashDraftEqualsItsCheckpointBitwise) {
  auto target = load_model(data("llama"));
  auto hf = DFlashDraft::load(data("llama-dflash"), *target);
  auto gguf = DFlashDraft::load(data("llama-dflash.gguf"), *target);
  EXPECT_EQ(gguf->config().target_layer_ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(gguf->config().taps, hf->config().taps);
  EXPECT_EQ(gguf->config().mask_token_id, 63);
  EXPECT_EQ(gguf->config().block_size, 4);
  const int n = 9;
  const auto features = test::random_normal(size_t(n * 2 * 32), 1.0f, 5);
  std::vector<std::vector<float>> blocks;
  for (const DFlashDraft* d : {hf.get(), gguf.get()}) {
    KvCache cache(d->kv_shape(4));
    const SeqId seq = cache.create();
    d->add_context(test::pool(), cache, seq, features.data(), n);
    blocks.emplace_back();
    d->draft_block(test::pool(), cache, seq, 17, &blocks.back());
  }
  ASSERT_EQ(blocks[0].size(), size_t(3 * 64));
  EXPECT_EQ(blocks[1], blocks[0]);
}

TEST(GgufFromLlamaCpp, DraftFilesThatAreNotEagle3DraftsAreNamed) {
  auto target = load_model(data("llama"));
  test::expect_mentions(test::error_of([&] { Eagle3Draft::load(data("llama.gguf"), *target); }),
                        {"llama.gguf", "'llama'", "eagle3"});
  test::TempDir d;
  const std::string bad = d.file("no-layers.gguf");
  test::write_gguf(bad, {{"general.architecture", "eagle3"}, {"eagle3.embedding_length", 32},
                         {"eagle3.feed_forward_length", 64}, {"eagle3.block_count", 1},
                         {"eagle3.attention.head_count", 2}, {"eagle3.attention.layer_norm_rms_epsilon", 1e-5}},
                   {});
  test::expect_mentions(test::error_of([&] { Eagle3Draft::load(bad, *target); }), {bad, "eagle3.target_layers"});
}

}  // namespace
}  // namespace eaglet
