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

}  // namespace
}  // namespace eaglet
