// EAGLE-3 on a synthetic MiniMax-M3 target: greedy speculative decoding equals plain greedy
// decoding (with prompts long enough for MSA to drop blocks, so verification passes run sparse
// attention from the index-key cache), with the Inferact-style draft (EAGLE-3.1 fc_norm +
// norm_output, MHA, own embedding and lm_head) and with a draft the trainer trains end to end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine/model_bundle.h"
#include "models/eagle3.h"
#include "speculation/eagle3_proposer.h"
#include "speculation/ngram_proposer.h"
#include "support/greedy_check.h"
#include "support/minimax_fixture.h"
#include "support/synthetic_eagle3.h"
#include "support/test_util.h"

namespace eaglet {
namespace {

TEST(MiniMaxSpeculative, InferactDraftConfigTapsTheDefaultM3Layers) {
  // The shape of the Inferact MiniMax-M3 EAGLE-3.1 draft config: MHA, its own vocabulary-size
  // embedding and lm_head, fc_norm + norm_output, no explicit aux ids.
  const JsonConfig cfg(nlohmann::json{{"architectures", {"LlamaForCausalLMEagle3"}},
                                      {"hidden_size", 6144},
                                      {"intermediate_size", 16384},
                                      {"num_attention_heads", 64},
                                      {"num_key_value_heads", 64},
                                      {"head_dim", 128},
                                      {"vocab_size", 200064},
                                      {"draft_vocab_size", 200064},
                                      {"rms_norm_eps", 1e-6},
                                      {"fc_norm", true},
                                      {"norm_output", true}},
                       "draft/config.json");
  const Eagle3Config c = parse_eagle3_config(cfg, /*target_layers=*/60, {.numbering = AuxNumbering::Input});
  EXPECT_EQ(c.aux_layers, (std::vector<int>{2, 30, 57}));
  EXPECT_TRUE(c.fc_norm);
  EXPECT_TRUE(c.norm_output);
  EXPECT_EQ(c.num_heads, c.num_kv_heads);
  EXPECT_EQ(c.draft_vocab, 200064);
}


TEST(MiniMaxSpeculative, GreedyEqualsPlainWithAnInferactStyleDraft) {
  if (!test::python_numpy_available()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy (apt: python3-numpy)";
  test::TempDir dir;
  test::write_synthetic_minimax(dir.file("target"), "m3", "mxfp8");
  ModelBundle b = load_bundle(dir.file("target"));
  test::DraftSpec ds;
  ds.hidden = ds.target_hidden = 256;
  ds.heads = ds.kv_heads = 2;  // MHA
  ds.head_dim = 128;
  ds.intermediate = 256;
  ds.vocab = ds.draft_vocab = b.model->config().vocab;
  ds.own_embed = ds.own_lm_head = true;
  ds.fc_norm = ds.norm_output = true;
  ds.aux_ids = {1, 3, 5};
  test::write_draft(dir.file("draft"), ds);
  // 250-280 token prompts + 24 new tokens: positions cross 256, where MSA keeps 2 of 3 blocks.
  const auto prompts = test::byte_prompts(4, 250);
  // Sparse attention verifies chains: tree shapes and auto fall back to chains of their depth.
  SpecOptions eagle;
  eagle.draft_dir = dir.file("draft");
  test::expect_greedy_equal(*b.model, b.tokenizer, {}, prompts, eagle, 24, {"k=1", "k=3", "k=4", "topk=4,depth=3,budget=8"});
  SpecOptions ngram;
  ngram.method = "ngram";
  EXPECT_GT(test::expect_greedy_equal(*b.model, b.tokenizer, {}, prompts, ngram, 24, {"k=3"}), 0)
      << "no draft token was ever accepted, so the accept path went untested";
}

}  // namespace
}  // namespace eaglet
