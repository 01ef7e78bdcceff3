// `--draft-quantize q8_0|q4_0|q4_k` (vLLM's speculative_config `quantization`): the draft's own
// matrices re-stored as GGUF blocks on load. The draft only proposes, so the output stays the
// target's token for token, whatever the draft's weights; the draft itself stays close to its
// float self and streams fewer bytes per level. Bad values are errors naming the option.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"
#include "engine/model_bundle.h"
#include "models/dflash.h"
#include "models/eagle3.h"
#include "speculation/spec_setup.h"
#include "support/greedy_check.h"
#include "support/synthetic_dflash.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

// A random EAGLE-3 draft for stories260K whose every matrix has whole 32-weight rows.
test::DraftSpec stories_draft() {
  test::DraftSpec ds;
  ds.hidden = ds.target_hidden = 64;
  ds.vocab = ds.draft_vocab = 512;
  ds.heads = 4, ds.kv_heads = 4, ds.head_dim = 16, ds.intermediate = 96;
  return ds;
}

double relative_rms(const std::vector<float>& ref, const std::vector<float>& x) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += double(ref[i] - x[i]) * (ref[i] - x[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

TEST(DraftQuantize, Eagle3DraftStaysCloseAndStreamsFewerBytes) {
  test::TempDir dir;
  test::TinyModelSpec ts;
  ts.hidden = 64, ts.heads = 4, ts.kv_heads = 4, ts.head_dim = 16, ts.intermediate = 96, ts.vocab = 512;
  test::write_tiny_model(dir.file("target"), ts);
  test::write_draft(dir.file("draft"), stories_draft());
  auto target = load_model(dir.file("target"));
  auto logits = [&](kernels::QuantScheme q, size_t* bytes) {
    auto d = Eagle3Draft::load(dir.file("draft"), *target);
    d->quantize_weights(q);
    *bytes = d->weight_bytes();
    return test::fixed_prompt_logits(*d);
  };
  size_t f32_bytes = 0, q8_bytes = 0, q4_bytes = 0;
  const auto f = logits(kernels::QuantScheme::None, &f32_bytes);
  const auto q8 = logits(kernels::QuantScheme::Q8_0, &q8_bytes);
  const auto q4 = logits(kernels::QuantScheme::Q4_0, &q4_bytes);
  // F32 -> 34 and 18 bytes per 32 weights: every matrix (layer, fc, own lm_head) was re-stored.
  EXPECT_NEAR(double(q8_bytes) / double(f32_bytes), 34.0 / 128.0, 0.01);
  EXPECT_NEAR(double(q4_bytes) / double(f32_bytes), 18.0 / 128.0, 0.01);
  // Two matmuls deep with int8 activations: ~1% for Q8_0; a broken layout gives O(1).
  EXPECT_GT(relative_rms(f, q8), 0.0);
  EXPECT_LT(relative_rms(f, q8), 0.05);
  EXPECT_LT(relative_rms(f, q8), relative_rms(f, q4));
  EXPECT_LT(relative_rms(f, q4), 0.5);
}

TEST(DraftQuantize, Eagle3GreedyOutputStaysTheTargets) {
  EAGLET_REQUIRE_SHARED();
  ModelBundle b = load_bundle(test::shared_dir() + "/models/stories260K-hf");
  test::TempDir dir;
  test::write_draft(dir.path(), stories_draft());
  std::vector<std::vector<int>> prompts;
  const std::vector<std::string> starts = {"Once upon a time", "Lily and Tom", "The cat", "One day", "Sam saw a big"};
  for (int i = 0; i < 10; ++i) {
    auto ids = b.tokenizer.encode(starts[size_t(i) % starts.size()]);
    ids.push_back(300 + i);
    prompts.push_back(ids);
  }
  for (const char* q : {"q8_0", "q4_0"}) {
    SpecOptions eagle;
    eagle.draft_dir = dir.path();
    eagle.draft_quantize = q;
    eagle.cost_model_cache = "off";
    SCOPED_TRACE(q);
    const SpecSetup spec(eagle, *b.model);
    EXPECT_NE(spec.describe().find(std::string("weights ") + q), std::string::npos) << spec.describe();
    test::expect_greedy_equal(*b.model, b.tokenizer, b.eos_ids, prompts, eagle, 32,
                              {"k=1", "k=3", "topk=4,depth=4,budget=12", "auto"});
  }
}

// The DFlash rig's 48-wide matrices are not whole blocks: those stay F32, the rest are Q8_0, and
// the output is still the target's.
TEST(DraftQuantize, DFlashGreedyOutputStaysTheTargets) {
  test::TempDir dir;
  test::write_tiny_model(dir.file("target"), {});
  auto target = load_model(dir.file("target"));
  test::write_dflash_draft(dir.file("draft"), test::dflash_draft_config());
  auto f32 = DFlashDraft::load(dir.file("draft"), *target);
  auto q8 = DFlashDraft::load(dir.file("draft"), *target);
  q8->quantize_weights(kernels::QuantScheme::Q8_0);
  KvCache cf(f32->kv_shape(8)), cq(q8->kv_shape(8));
  const SeqId sf = cf.create(), sq = cq.create();
  const int64_t n = 6, width = int64_t(f32->config().taps.size()) * target->config().hidden;
  const auto features = test::random_normal(size_t(n * width), 1.0f, 3);
  f32->add_context(test::pool(), cf, sf, features.data(), n);
  q8->add_context(test::pool(), cq, sq, features.data(), n);
  std::vector<float> lf, lq;
  f32->draft_block(test::pool(), cf, sf, 5, &lf);
  q8->draft_block(test::pool(), cq, sq, 5, &lq);
  EXPECT_GT(relative_rms(lf, lq), 0.0);  // it did quantise
  EXPECT_LT(relative_rms(lf, lq), 0.05);

  Tokenizer tok = Tokenizer::bytes();
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 12; ++i) prompts.push_back({1, 3 + i % 50, 7 + (i * 13) % 50, 4 + i % 7});
  SpecOptions o;
  o.method = "dflash";
  o.draft_dir = dir.file("draft");
  o.draft_quantize = "q8_0";
  o.cost_model_cache = "off";
  EXPECT_GT(test::expect_greedy_equal(*target, tok, {}, prompts, o, 32, {"k=3", "topk=2,depth=4,budget=8", "auto"}), 0);
}

// `eaglet bench` names the kernels the draft's matrices run on, as it does the target's: here a
// DFlash draft whose 48-wide matrices stay F32 and whose others became Q8_0.
TEST(DraftQuantize, BenchNamesTheDraftsKernels) {
  test::TempDir dir;
  test::write_byte_vocab_target(dir.file("target"));
  test::write_dflash_draft(dir.file("dflash"), test::dflash_draft_config(96, 4));
  const auto r = test::run_command(test::eaglet_binary() + " bench -m " + dir.file("target") + " --spec-method dflash --draft " +
                                   dir.file("dflash") + " --draft-quantize q8_0 -k 3 --num-prompts 1 --max-tokens 8 "
                                   "--skip-bandwidth --thread-counts 1 --json " + dir.file("out.json") + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("draft matmul kernels: "), std::string::npos) << r.output;
  const auto report = nlohmann::json::parse(read_text_file(dir.file("out.json")));
  int matrices = 0, q8 = 0;
  for (auto& [name, count] : report["draft_matmul_kernels"].items()) {
    matrices += count.get<int>();
    if (name.find("Q8_0") != std::string::npos) q8 += count.get<int>();
  }
  EXPECT_EQ(matrices, 16) << report.dump();  // fc, the target's lm_head, 2 layers x 7
  EXPECT_EQ(q8, 5) << report.dump();
  EXPECT_NE(report["runs"][0]["speculative"]["draft_shape"].get<std::string>().find("weights q8_0"), std::string::npos);
}

TEST(DraftQuantize, OptionsAreNamed) {
  SpecOptions o;
  apply_speculative_config(o, R"({"method": "eagle3", "model": "d", "quantization": "q4_0"})");
  EXPECT_EQ(o.draft_quantize, "q4_0");
  test::expect_mentions(test::error_of([&] { apply_speculative_config(o, R"({"quantization": "fp8"})"); }),
                        {"--speculative-config", "quantization", "fp8", "q8_0"});
  test::expect_mentions(test::error_of([&] { apply_speculative_config(o, R"({"quantization": 8})"); }),
                        {"--speculative-config", "quantization", "string"});
  test::TempDir dir;
  test::write_tiny_model(dir.file("target"), {});
  auto target = load_model(dir.file("target"));
  SpecOptions bad;
  bad.draft_dir = dir.file("no-such-draft");
  bad.draft_quantize = "q5_k";
  // Refused before the draft is looked for.
  test::expect_mentions(test::error_of([&] { SpecSetup(bad, *target); }), {"--draft-quantize", "q5_k"});
}

}  // namespace
}  // namespace eaglet
