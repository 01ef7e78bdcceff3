// The real `eaglet` binary end to end.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "support/synthetic_dflash.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"
#include "tokenizer/tokenizer.h"

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
  test::TempDir dir;
  test::write_bf16_copy(test::shared_dir() + "/models/stories260K-hf", dir.file("bf16"));
  // Every kernel path gives the reference tokens in BF16 too (amx-model: the AMX kernel's
  // logic over the portable tile model, weights packed into tiles at load).
  for (const char* isa : {"scalar", "avx2", "avx512", "avx512bf16", "amx", "amx-model"}) {
    auto r = test::run_command("EAGLET_ISA=" + std::string(isa) + " " + test::eaglet_binary() + " generate -m " +
                               dir.file("bf16") + " -p 'Once upon a time' -n 64 --temperature 0 --json 2>/dev/null");
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

TEST(Cli, VersionAndVerboseAnywhere) {
  auto r = test::run_command(test::eaglet_binary() + " --version 2>&1");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("eaglet 0."), std::string::npos) << r.output;
  // -v used to be accepted only before the subcommand, and then did nothing.
  for (const char* args : {" -v generate -n 2", " generate -n 2 -v"}) {
    r = test::run_command(test::eaglet_binary() + args + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("[debug]"), std::string::npos) << args << "\n" << r.output;
  }
  r = test::run_command(test::eaglet_binary() + " generate -n 2 2>&1");
  EXPECT_EQ(r.output.find("[debug]"), std::string::npos) << r.output;
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

namespace eaglet {
namespace {

TEST(CliSpeculative, GenerateWithDraftMatchesPlainAndReportsMetrics) {
  EAGLET_REQUIRE_SHARED();
  const std::string model = test::shared_dir() + "/models/stories260K-hf";
  test::TempDir dir;
  test::DraftSpec ds;
  ds.hidden = ds.target_hidden = 64;
  ds.vocab = ds.draft_vocab = 512;
  ds.heads = ds.kv_heads = 4;
  ds.head_dim = 16;
  test::write_draft(dir.path(), ds);
  auto plain = generate_json(model);
  for (std::string extra : {"--draft " + dir.path() + " -k 4", std::string("--spec-method ngram -k 3")}) {
    auto spec = generate_json(model, extra);
    EXPECT_EQ(spec["token_ids"], plain["token_ids"]) << extra;
    const auto& sd = spec["stats"]["spec_decode"];
    EXPECT_GT(sd["num_drafts"].get<int>(), 0);
    EXPECT_NEAR(sd["mean_acceptance_length"].get<double>(),
                1.0 + sd["num_accepted_tokens"].get<double>() / sd["num_drafts"].get<double>(), 1e-9);
  }
}

TEST(CliSpeculative, BenchWritesJsonReport) {
  EAGLET_REQUIRE_SHARED();
  test::TempDir dir;
  const std::string data = dir.file("prompts.jsonl");
  test::write_text(data, "{\"prompt\": \"Once upon a time\"}\n{\"turns\": [\"The dog\"]}\n"
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"Lily\"}]}\n");
  auto r = test::run_command(test::eaglet_binary() + " bench -m " + test::shared_dir() +
                             "/models/stories260K-hf --spec-method ngram --dataset " + data +
                             " --num-prompts 3 --max-tokens 24 --skip-bandwidth --thread-counts 1,2 --json " +
                             dir.file("out.json") + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(read_text_file(dir.file("out.json")));
  ASSERT_EQ(j["runs"].size(), 2u);
  for (auto& run : j["runs"]) {
    EXPECT_EQ(run["speculative"]["outputs_identical_to_baseline"].get<int>(), 3);
    EXPECT_GT(run["baseline"]["decode_tokens_per_second"].get<double>(), 0);
    const auto& base = run["baseline"];
    EXPECT_GT(base["itl_p50_s"].get<double>(), 0);
    EXPECT_LE(base["itl_p50_s"].get<double>(), base["itl_p90_s"].get<double>());
    EXPECT_LE(base["itl_p90_s"].get<double>(), base["itl_p99_s"].get<double>());
    EXPECT_GT(base["effective_bandwidth_at_median_step_gbps"].get<double>(), 0);
    EXPECT_GT(run["verify_cost"]["step"]["seconds"].get<double>(), 0);
    EXPECT_GE(run["speculative"]["spec_decode"]["mean_acceptance_length"].get<double>(), 1.0);
  }
  EXPECT_EQ(j["num_prompts"].get<int>(), 3);
}

// The text and the JSON print one report: the figures people read are the ones scripts get.
TEST(CliSpeculative, BenchTextAndJsonShowTheSameFigures) {
  EAGLET_REQUIRE_SHARED();
  test::TempDir dir;
  auto r = test::run_command(test::eaglet_binary() + " bench -m " + test::shared_dir() +
                             "/models/stories260K-hf --spec-method ngram -k 2 --num-prompts 2 --max-tokens 16 "
                             "--skip-bandwidth --thread-counts 1 --json " + dir.file("out.json") + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(read_text_file(dir.file("out.json")));
  const auto& run = j["runs"][0];
  auto shown = [&](const std::string& text) {
    EXPECT_NE(r.output.find(text), std::string::npos) << "missing '" << text << "' in\n" << r.output;
  };
  shown(fmt::format("prompts: {} (built-in) | max tokens: {}", j["num_prompts"].get<int>(), j["max_tokens"].get<int>()));
  shown(fmt::format("baseline : {:7.2f} tok/s decode, {} tokens", run["baseline"]["decode_tokens_per_second"].get<double>(),
                    run["baseline"]["decode_tokens"].get<int64_t>()));
  shown(fmt::format("prefill  : {:7.1f} tok/s ({} tokens)", run["prefill"]["tokens_per_second"].get<double>(),
                    run["prefill"]["tokens"].get<int>()));
  const auto& sp = run["speculative"];
  shown(fmt::format("{:7.2f} tok/s decode, {} tokens, speedup {:.2f}x, outputs identical to baseline: {}/2",
                    sp["decode_tokens_per_second"].get<double>(), sp["decode_tokens"].get<int64_t>(),
                    sp["speedup"].get<double>(), sp["outputs_identical_to_baseline"].get<int>()));
  shown(sp["draft_shape"].get<std::string>());
}

// Under --json-schema the bench also decodes without the constraint (before and after the
// constrained baseline) and reports the ratio, in the text and the JSON alike.
TEST(CliSpeculative, BenchUnderASchemaMeasuresTheUnconstrainedDecodeToo) {
  EAGLET_REQUIRE_SHARED();
  test::TempDir dir;
  auto r = test::run_command(test::eaglet_binary() + " bench -m " + test::shared_dir() +
                             "/models/stories260K-hf --json-schema " + test::source_dir() +
                             "/examples/structured/story.schema.json --num-prompts 2 --max-tokens 24 --skip-bandwidth "
                             "--thread-counts 1 --temperature 0 --json " + dir.file("out.json") + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto run = nlohmann::json::parse(read_text_file(dir.file("out.json")))["runs"][0];
  const auto& u = run["unconstrained"];
  EXPECT_EQ(u["tokens"].get<int64_t>(), 2 * run["baseline"]["decode_tokens"].get<int64_t>()) << u;  // two passes
  EXPECT_NEAR(u["constrained_ratio"].get<double>(),
              run["baseline"]["decode_tokens_per_second"].get<double>() / u["tokens_per_second"].get<double>(), 1e-9);
  EXPECT_NE(r.output.find(fmt::format("the constrained baseline decodes at {:.1f}% of it", 100 * u["constrained_ratio"].get<double>())),
            std::string::npos) << r.output;
}

// --compare-config runs another method and draft (here a DFlash block draft beside n-gram lookup)
// against the same baseline in the same run; a bad one is refused naming the option.
TEST(CliSpeculative, BenchComparesAnotherMethodInTheSameRun) {
  test::TempDir dir;
  test::write_byte_vocab_target(dir.file("target"));
  test::write_dflash_draft(dir.file("dflash"), test::dflash_draft_config());
  const std::string bench = test::eaglet_binary() + " bench -m " + dir.file("target") +
                            " --spec-method ngram -k 2 --num-prompts 2 --max-tokens 16 --skip-bandwidth --thread-counts 1";
  auto r = test::run_command(bench + " --compare-config '{\"method\":\"dflash\",\"model\":\"" + dir.file("dflash") +
                             "\",\"num_speculative_tokens\":5}' --json " + dir.file("reports/out.json") + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;  // the report's folder is made
  const auto run = nlohmann::json::parse(read_text_file(dir.file("reports/out.json")))["runs"][0];
  EXPECT_EQ(run["speculative"]["method"], "ngram");
  ASSERT_EQ(run["speculative_compared"].size(), 1u);
  const auto& d = run["speculative_compared"][0];
  EXPECT_EQ(d["method"], "dflash");
  EXPECT_EQ(d["num_speculative_tokens"], 5);
  EXPECT_NE(d["draft_shape"].get<std::string>().find("DFlash draft"), std::string::npos) << d.dump();
  EXPECT_EQ(d["outputs_identical_to_baseline"], 2);
  EXPECT_GT(d["spec_decode"]["num_drafts"].get<int64_t>(), 0) << d.dump();
  r = test::run_command(bench + " --compare-config '{\"method\":\"medusa\"}' 2>&1");
  EXPECT_NE(r.exit_code, 0);
  test::expect_mentions(r.output, {"--compare-config", "medusa"});
  // A report that cannot be written fails before the run, not after it.
  r = test::run_command(bench + " --json " + dir.file("target") + "/config.json/out.json 2>&1");
  EXPECT_NE(r.exit_code, 0);
  test::expect_mentions(r.output, {"--json", "config.json/out.json", "cannot write"});
  EXPECT_EQ(r.output.find("baseline"), std::string::npos) << r.output;
}

// --max-num-seqs N runs the prompts N at a time through one engine, as a server at concurrency N:
// output tokens over the whole run, every output still the batched baseline's.
TEST(CliSpeculative, BenchRunsThePromptsBatched) {
  test::TempDir dir;
  test::write_byte_vocab_target(dir.file("target"));
  auto r = test::run_command(test::eaglet_binary() + " bench -m " + dir.file("target") +
                             " --spec-method ngram -k 2 --num-prompts 6 --max-tokens 16 --ignore-eos --max-num-seqs 4"
                             " --skip-bandwidth --thread-counts 1 --json " + dir.file("out.json") + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 sequences at a time"), std::string::npos) << r.output;
  const auto run = nlohmann::json::parse(read_text_file(dir.file("out.json")))["runs"][0];
  EXPECT_EQ(run["baseline"]["max_num_seqs"], 4);
  EXPECT_EQ(run["baseline"]["output_tokens"], 6 * 16);
  EXPECT_GT(run["baseline"]["output_tokens_per_second"].get<double>(), 0);
  EXPECT_FALSE(run["baseline"].contains("fraction_of_read_bandwidth"));  // steps are not single-token decodes
  const auto& s = run["speculative"];
  EXPECT_EQ(s["output_tokens"], 6 * 16);
  EXPECT_EQ(s["outputs_identical_to_baseline"], 6);
  EXPECT_GT(s["spec_decode"]["num_drafts"].get<int64_t>(), 0) << s.dump();
  r = test::run_command(test::eaglet_binary() + " bench -m " + dir.file("target") + " --max-num-seqs 0 2>&1");
  EXPECT_NE(r.exit_code, 0);
  test::expect_mentions(r.output, {"--max-num-seqs"});
}

TEST(CliSpeculative, BenchProbesBandwidthAroundEachPrompt) {
  EAGLET_REQUIRE_SHARED();
  test::TempDir dir;
  auto r = test::run_command(test::eaglet_binary() + " bench -m " + test::shared_dir() +
                             "/models/stories260K-hf --num-prompts 2 --max-tokens 8 --thread-counts 1 --json " +
                             dir.file("out.json") + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto run = nlohmann::json::parse(read_text_file(dir.file("out.json")))["runs"][0];
  const auto& bw = run["memory_bandwidth_gbps"];
  ASSERT_EQ(bw["probes"].size(), 3u);  // before the first prompt and after each
  double best = 0;
  for (auto& p : bw["probes"]) best = std::max(best, p["read"].get<double>());
  EXPECT_DOUBLE_EQ(bw["read"].get<double>(), best);
  EXPECT_GT(bw["nearby_read"].get<double>(), 0);
  EXPECT_LE(bw["nearby_read"].get<double>(), best * (1 + 1e-12));
  EXPECT_GE(run["baseline"]["fraction_of_nearby_read_bandwidth"].get<double>(),
            run["baseline"]["fraction_of_read_bandwidth"].get<double>() * (1 - 1e-12));
}

TEST(CliSpeculative, BadSpecOptionsAreErrors) {
  auto r = test::run_command(test::eaglet_binary() + " generate --spec-method eagle3 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("needs --draft"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " generate --spec-method medusa 2>&1");
  EXPECT_NE(r.output.find("must be one of eagle3, ngram, dflash, none (got 'medusa')"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " generate --spec-method ngram --draft-shape topk=4,width=3 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--draft-shape 'topk=4,width=3': 'width=3' is not one of"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " generate --spec-method ngram --draft-shape budget=64 2>&1");
  EXPECT_NE(r.output.find("budget must be in [1, 63]"), std::string::npos) << r.output;
}

TEST(CliSpeculative, VllmSpeculativeConfigAndLlamaServerNames) {
  // vLLM's --speculative-config JSON and llama-server's --model-draft / --draft-max reach the same
  // options as eaglet's own flags (the built-in model and n-gram lookup: no files needed).
  const std::string gen = test::eaglet_binary() + " generate -p 'the cat sat on the mat the cat sat on' -n 16 --json ";
  auto r = test::run_command(gen + R"(--speculative-config '{"method": "ngram", "num_speculative_tokens": 2, )"
                                   R"("prompt_lookup_max": 4, "draft_tensor_parallel_size": 1}' 2>/dev/null)");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto sd = nlohmann::json::parse(r.output)["stats"]["spec_decode"];
  EXPECT_EQ(sd["method"], "ngram");
  EXPECT_EQ(sd["num_speculative_tokens"], 2);
  EXPECT_NE(sd["draft_shape"].get<std::string>().find("n 1..4"), std::string::npos) << sd.dump();
  r = test::run_command(gen + "--spec-method ngram --draft-max 3 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["stats"]["spec_decode"]["num_speculative_tokens"], 3);
  // llama-server's --spec-type and --spec-draft-n-max.
  r = test::run_command(gen + "--spec-type ngram-simple --spec-draft-n-max 2 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  sd = nlohmann::json::parse(r.output)["stats"]["spec_decode"];
  EXPECT_EQ(sd["method"], "ngram");
  EXPECT_EQ(sd["num_speculative_tokens"], 2);
  r = test::run_command(test::eaglet_binary() + " generate --spec-type draft-mtp 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("'draft-mtp' is not one eaglet runs"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " generate --spec-type draft-dflash --spec-draft-model /nonexistent 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " generate --model-draft /nonexistent 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent"), std::string::npos) << r.output;
  for (auto [json, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"method": "medusa"})", "method 'medusa' is not run here"},
           {R"({"metod": "ngram"})", "unknown key 'metod'"},
           {R"({"num_speculative_tokens": "3"})", "'num_speculative_tokens' must be an integer in [0, 16]"},
           {R"({"draft_tensor_parallel_size": 2})", "'draft_tensor_parallel_size' must be an integer in [1, 1]"},
           {R"([1, 2])", "not a JSON object"}}) {
    r = test::run_command(test::eaglet_binary() + " generate --speculative-config '" + json + "' 2>&1");
    EXPECT_EQ(r.exit_code, 1) << json;
    EXPECT_NE(r.output.find(want), std::string::npos) << json << "\n" << r.output;
  }
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

nlohmann::json run_generate_json(const std::string& args, int* code = nullptr) {
  auto r = test::run_command(test::eaglet_binary() + " generate " + args + " --json 2>&1");
  if (code) *code = r.exit_code;
  // The JSON object is the last thing printed (the log goes first, to stderr).
  const size_t nl = r.output.rfind("\n{\n");
  const size_t at = nl == std::string::npos ? 0 : nl + 1;
  nlohmann::json j = nlohmann::json::parse(r.output.substr(at), nullptr, false);
  return j.is_discarded() ? nlohmann::json{{"failed", r.output}} : j;
}

// generate --chat renders -p (and --system) with the chat template; penalties, --draft-min,
// --dtype and --tokenizer as vLLM and llama.cpp users spell them.
TEST(CliOptions, ChatPenaltiesDraftMinDtypeAndTokenizer) {
  test::TempDir d;
  test::write_byte_vocab_target(d.file("m"), /*chat_template=*/true);
  const Tokenizer tok = Tokenizer::from_dir(d.file("m"));
  const std::string m = " -m " + d.file("m") + " --temperature 0";
  nlohmann::json j = run_generate_json(m + " -n 4 --chat --system 'be nice' -p hi");
  ASSERT_TRUE(j.contains("prompt_token_ids")) << j.dump();
  EXPECT_EQ(j["prompt_token_ids"].get<std::vector<int>>(), tok.encode("<s>[system] be nice</s>[user] hi</s>[assistant] ", 0)) << j.dump();
  test::write_text(d.file("t.jinja"), "{% for m in messages %}<{{ m.content }}>{% endfor %}");
  j = run_generate_json(m + " -n 4 --chat --chat-template " + d.file("t.jinja") + " -p hi");
  EXPECT_EQ(j["prompt_token_ids"].get<std::vector<int>>(), tok.encode("<hi>", 0));
  test::write_byte_vocab_target(d.file("plain"));
  auto r = test::run_command(test::eaglet_binary() + " generate -m " + d.file("plain") + " --chat -p hi 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--chat-template"), std::string::npos) << r.output;

  int code = 0;
  j = run_generate_json(m + " -p abcabc --repeat-penalty 1.3 --frequency-penalty 0.5 --presence-penalty 0.5", &code);
  EXPECT_EQ(code, 0);
  r = test::run_command(test::eaglet_binary() + " generate" + m + " -p x --presence-penalty 3 2>&1");
  EXPECT_NE(r.exit_code, 0);

  // --draft-min above k: every draft is dropped, plain decoding with the same output.
  const std::string ngram = m + " -n 24 -p abcabcabcabcabcabc --spec-method ngram -k 3";
  const nlohmann::json any = run_generate_json(ngram), dropped = run_generate_json(ngram + " --draft-min 4");
  ASSERT_TRUE(any.contains("stats") && any["stats"].contains("spec_decode")) << any.dump();
  ASSERT_TRUE(dropped.contains("stats") && dropped["stats"].contains("spec_decode")) << dropped.dump();
  EXPECT_GT(any["stats"]["spec_decode"]["num_drafts"].get<int>(), 0) << any.dump();
  EXPECT_EQ(dropped["stats"]["spec_decode"]["num_drafts"], 0) << dropped.dump();
  EXPECT_EQ(any["token_ids"], dropped["token_ids"]);

  EXPECT_EQ(run_generate_json(m + " -n 4 -p x --dtype float32", &code)["finish_reason"], "length");
  r = test::run_command(test::eaglet_binary() + " generate" + m + " -p x --dtype bfloat16 2>&1");
  EXPECT_NE(r.exit_code, 0);
  test::expect_mentions(r.output, {"--dtype bfloat16", "F32"});
  r = test::run_command(test::eaglet_binary() + " generate" + m + " -p x --dtype int3 2>&1");
  test::expect_mentions(r.output, {"--dtype", "int3"});

  // --tokenizer: another directory's tokenizer; one with more tokens than the model is refused by name.
  EXPECT_EQ(run_generate_json(m + " -n 4 -p x --tokenizer " + d.file("plain"), &code)["finish_reason"], "length");
  EXPECT_EQ(code, 0);
  test::TinyModelSpec small;
  small.vocab = 97;
  test::write_tiny_model(d.file("small"), small);
  r = test::run_command(test::eaglet_binary() + " generate -m " + d.file("small") + " --tokenizer " + d.file("plain") + " -p x 2>&1");
  EXPECT_NE(r.exit_code, 0);
  test::expect_mentions(r.output, {d.file("plain") + "/tokenizer.json", "vocab_size"});
}

}  // namespace
}  // namespace eaglet
