// Absurd or hostile model directories are refused at load with one line naming the file, the
// field and the value (issue 12, failures 8-10): negative or huge token ids in tokenizer.json,
// an empty vocabulary, rope/norm parameters that silently produce garbage, special ids outside
// the vocabulary, and context lengths whose KV cache cannot be allocated.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/model_bundle.h"
#include "io/mapped_file.h"
#include "models/model.h"
#include "runtime/scheduler.h"
#include "speculation/spec_setup.h"
#include "support/test_util.h"
#include "tokenizer/tokenizer.h"

namespace eaglet {
namespace {

using json = nlohmann::json;

json byte_tokenizer() { return json::parse(read_text_file(test::source_dir() + "/tests/data/bytes_tokenizer.json")); }

std::string tokenizer_error(const json& tj) {
  return test::error_of([&] { Tokenizer::from_json(tj, "tok/tokenizer.json"); });
}

TEST(LoadValidation, NegativeVocabularyIdsAreRefused) {
  // These crashed (SIGSEGV) or corrupted the heap (invalid free).
  for (json bad : {json(-1), json(-1000), json(INT32_MIN), json(-1e8), json(2.5), json("7")}) {
    json tj = byte_tokenizer();
    tj["model"]["vocab"]["<0x41>"] = bad;
    test::expect_mentions(tokenizer_error(tj), {"tok/tokenizer.json", "model.vocab", "<0x41>"});
  }
  json tj = byte_tokenizer();
  tj["added_tokens"][1]["id"] = -5;
  test::expect_mentions(tokenizer_error(tj), {"added_tokens[1]", "-5"});
}

TEST(LoadValidation, HugeTokenIdsAreRefusedQuickly) {
  // 99,999,999 took 12 s and 3.3 GB; 1e9 threw a bare std::bad_alloc.
  for (int64_t id : {int64_t(99'999'999), int64_t(1'000'000'000), int64_t(1) << 40}) {
    json tj = byte_tokenizer();
    tj["added_tokens"].push_back({{"id", id}, {"content", "<big>"}, {"special", true}});
    const auto t0 = std::chrono::steady_clock::now();
    test::expect_mentions(tokenizer_error(tj), {"added_tokens[3]", std::to_string(id)});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
    tj = byte_tokenizer();
    tj["model"]["vocab"]["<big>"] = id;
    test::expect_mentions(tokenizer_error(tj), {"model.vocab", "<big>", std::to_string(id)});
  }
}

TEST(LoadValidation, EmptyOrMalformedVocabularyIsRefused) {
  json tj = byte_tokenizer();
  tj["model"]["vocab"] = json::object();
  tj["added_tokens"] = json::array();
  test::expect_mentions(tokenizer_error(tj), {"tok/tokenizer.json", "empty"});
  tj = byte_tokenizer();
  tj["added_tokens"][0]["content"] = 5;
  test::expect_mentions(tokenizer_error(tj), {"added_tokens[0]", "content"});
  tj = byte_tokenizer();
  tj["added_tokens"] = "x";
  test::expect_mentions(tokenizer_error(tj), {"added_tokens"});
  tj = byte_tokenizer();
  tj["model"]["merges"] = json::array({json::array({1, 2})});
  test::expect_mentions(tokenizer_error(tj), {"merges"});
}

TEST(LoadValidation, StripDecoderStartMustBeACount) {
  // 1e300 was cast to int (undefined behaviour, found by fuzz_tokenizer_json under UBSan).
  for (json bad : {json(1e300), json(-1), json(1.5), json("1")}) {
    json tj = byte_tokenizer();
    tj["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", bad}, {"stop", 0}};
    test::expect_mentions(tokenizer_error(tj), {"tok/tokenizer.json", "Strip", "start", bad.dump()});
  }
  json tj = byte_tokenizer();
  tj["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}};
  EXPECT_EQ(tokenizer_error(tj), "<no error>");
}

class ConfigValidation : public ::testing::Test {
 protected:
  void SetUp() override { test::write_byte_vocab_target(dir_.path()); }
  // Loads the model directory with one config.json field changed (null removes it).
  std::string error_with(const std::string& key, const json& value) {
    json cfg = json::parse(read_text_file(dir_.file("config.json")));
    cfg[key] = value;
    test::write_text(dir_.file("config.json"), cfg.dump());
    return test::error_of([&] { load_bundle(dir_.path()); });
  }
  test::TempDir dir_;
};

TEST_F(ConfigValidation, RopeAndNormParametersMustMakeSense) {
  // Each of these ran and printed token 0 eight times.
  for (json theta : {json(0), json(-10000.0)}) test::expect_mentions(error_with("rope_theta", theta), {"config.json", "rope_theta"});
  test::expect_mentions(error_with("rope_theta", 10000.0), {"<no error>"});
  for (json eps : {json(-1), json(0), json(2.0)}) test::expect_mentions(error_with("rms_norm_eps", eps), {"config.json", "rms_norm_eps"});
  test::expect_mentions(error_with("rms_norm_eps", 1e-5), {"<no error>"});
  test::expect_mentions(error_with("rope_scaling", {{"rope_type", "linear"}, {"factor", 0}}), {"rope_scaling", "factor"});
  test::expect_mentions(error_with("rope_scaling", {{"rope_type", "linear"}, {"factor", -2}}), {"rope_scaling", "factor"});
  test::expect_mentions(error_with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8}, {"low_freq_factor", 4},
                                              {"high_freq_factor", 4}, {"original_max_position_embeddings", 64}}),
                  {"rope_scaling", "high_freq_factor"});
  test::expect_mentions(error_with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8}, {"low_freq_factor", 1},
                                              {"high_freq_factor", 4}, {"original_max_position_embeddings", 0}}),
                  {"rope_scaling", "original_max_position_embeddings"});
  test::expect_mentions(error_with("rope_scaling", nullptr), {"<no error>"});
  test::expect_mentions(error_with("partial_rotary_factor", 0.0), {"partial_rotary_factor"});
}

TEST_F(ConfigValidation, ContextLengthAndSpecialIdsAreCheckedAtLoad) {
  // max_position_embeddings <= 0 was only refused at generation time.
  for (json m : {json(0), json(-4)}) test::expect_mentions(error_with("max_position_embeddings", m), {"config.json", "max_position_embeddings"});
  error_with("max_position_embeddings", 512);
  // Out-of-range special ids were accepted.
  test::expect_mentions(error_with("bos_token_id", 259), {"config.json", "bos_token_id", "259"});
  test::expect_mentions(error_with("bos_token_id", -7), {"bos_token_id", "-7"});
  test::expect_mentions(error_with("bos_token_id", 1), {"<no error>"});
  test::expect_mentions(error_with("eos_token_id", json::array({2, 100000})), {"eos_token_id", "100000"});
  test::expect_mentions(error_with("eos_token_id", 2), {"<no error>"});
  // The same for generation_config.json.
  test::write_text(dir_.file("generation_config.json"), R"({"eos_token_id": [2, 4096]})");
  test::expect_mentions(test::error_of([&] { load_bundle(dir_.path()); }), {"generation_config.json", "eos_token_id", "4096"});
}

TEST_F(ConfigValidation, TokenizerIdsBeyondTheModelVocabularyAreRefused) {
  json tj = byte_tokenizer();
  tj["added_tokens"].push_back({{"id", 300}, {"content", "<extra>"}, {"special", true}});
  test::write_text(dir_.file("tokenizer.json"), tj.dump());
  // The model has 259 embedding rows: encoding "<extra>" would read past them.
  test::expect_mentions(test::error_of([&] { load_bundle(dir_.path()); }), {"tokenizer.json", "<extra>", "300", "vocab_size"});
}

TEST_F(ConfigValidation, KvCacheThatCannotBeAllocatedIsAClearError) {
  // max_position_embeddings 2e9 killed `serve` with std::bad_alloc.
  error_with("max_position_embeddings", 2'000'000'000);
  ModelBundle b = load_bundle(dir_.path());
  SpecSetup spec(SpecOptions{}, *b.model);
  ServingMetrics metrics;
  SchedulerOptions o;
  const std::string e = test::error_of([&] { Scheduler s(test::pool(), b, spec, o, metrics); });
  test::expect_mentions(e, {"max_model_len", "2000000000", "--max-model-len", "KV cache"});
  // Within the budget it starts, and a budget too small for one sequence is also named.
  o.max_model_len = 256;
  { Scheduler ok(test::pool(), b, spec, o, metrics); }
  o.kv_cache_bytes = 1000;
  test::expect_mentions(test::error_of([&] { Scheduler s(test::pool(), b, spec, o, metrics); }), {"--kv-cache-memory", "max_model_len"});
}

}  // namespace
}  // namespace eaglet
