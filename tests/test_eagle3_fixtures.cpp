// One small draft of every published EAGLE-3 flavour, run end to end by `eaglet generate --draft`
// and by an independent numpy reference of greedy chain speculative decoding
// (tests/reference/spec_decode_ref.py): the tokens and the per-position acceptance must be equal.
// The target is steered so that drafts are sometimes right: its head only ever picks among three
// tokens, and the drafts' pruned vocabulary holds those three and one more.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

struct Flavour {
  std::string name;
  test::DraftSpec spec;
  std::string semantics = "auto";
};

Flavour flavour(const std::string& name, const std::function<void(test::DraftSpec&)>& f, std::string semantics = "auto") {
  test::DraftSpec s;
  s.vocab = 259;
  s.draft_vocab = 3;
  s.scale = 0.3f;
  s.seed = 4;  // with this seed every flavour's drafts are accepted at every depth some of the time
  f(s);
  return {name, s, semantics};
}

void PrintTo(const Flavour& f, std::ostream* os) { *os << f.name; }

class FlavourFixture : public ::testing::TestWithParam<Flavour> {};

TEST_P(FlavourFixture, GenerateMatchesReferenceAcceptance) {
  if (!test::python_numpy_available()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy (apt: python3-numpy)";
  const Flavour& f = GetParam();
  test::TempDir dir;
  test::write_steered_byte_target(dir.file("target"));
  test::write_draft(dir.file("draft"), f.spec);
  const int k = 3, n = 64;
  auto r = test::run_command(test::eaglet_binary() + " generate -m " + dir.file("target") + " --draft " +
                             dir.file("draft") + " -k " + std::to_string(k) + " -n " + std::to_string(n) +
                             " --temperature 0 --ignore-eos -p 'Abc' --json --draft-semantics " + f.semantics +
                             " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto got = nlohmann::json::parse(r.output);
  std::string prompt;
  for (int id : got["prompt_token_ids"]) prompt += (prompt.empty() ? "" : ",") + std::to_string(id);
  auto ref = test::run_command("/usr/bin/python3 " + test::source_dir() + "/tests/reference/spec_decode_ref.py " +
                               dir.file("target") + " " + dir.file("draft") + " " + prompt + " " + std::to_string(k) +
                               " " + std::to_string(n) + " " + (f.semantics == "auto" ? "vllm" : f.semantics) + " 2>&1");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto want = nlohmann::json::parse(ref.output);
  EXPECT_EQ(got["token_ids"], want["token_ids"]);
  const auto& sd = got["stats"]["spec_decode"];
  EXPECT_EQ(sd["num_drafts"], want["num_drafts"]);
  EXPECT_EQ(sd["num_draft_tokens"], want["num_draft_tokens"]);
  EXPECT_EQ(sd["num_accepted_tokens_per_pos"], want["num_accepted_tokens_per_pos"]);
  RecordProperty("reference", want.dump());
  // The comparison means something only if drafts are accepted at every depth (the later ones read
  // the draft's own state) but not always.
  int accepted = 0;
  for (int a : want["num_accepted_tokens_per_pos"]) {
    EXPECT_GT(a, 0) << want.dump();
    accepted += a;
  }
  EXPECT_LT(accepted, want["num_draft_tokens"].get<int>()) << want.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Flavours, FlavourFixture,
    ::testing::Values(
        flavour("llama_eagle3", [](auto&) {}),
        flavour("llama_attention_bias", [](auto& s) { s.attention_bias = true; }),
        flavour("eagle31_fc_norm_norm_output", [](auto& s) { s.fc_norm = true; s.norm_output = true; s.own_embed = true; }),
        flavour("qwen3_layer", [](auto& s) { s.qwen3_layer = true; s.attention_bias = true; }),
        flavour("speculators_layout", [](auto& s) { s.speculators_config = true; s.vllm_keys = true; s.norm_before_fc = true; }),
        flavour("speculators_qwen3_layer", [](auto& s) { s.speculators_config = true; s.vllm_keys = true; s.qwen3_layer = true; }),
        flavour("specforge_layout", [](auto& s) { s.aux_ids = {1, 2, 3}; s.aux_in_eagle_config = true; s.fc_norm = true; }),
        flavour("specforge_legacy_norm_output", [](auto& s) { s.norm_output = true; }, "specforge-legacy"),
        flavour("specforge_legacy_plain", [](auto&) {}, "specforge-legacy"),
        flavour("two_layers", [](auto& s) { s.layers = 2; s.vllm_keys = true; }),
        flavour("transformers_v5_config", [](auto& s) {
          s.rope_parameters = true;
          s.rope_theta = 5e5;
          s.flags_in_eagle_config = true;
          s.norm_before_fc = true;
          s.norm_output = true;
        })),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace eaglet
