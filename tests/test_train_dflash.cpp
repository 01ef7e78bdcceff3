// DFlash training (train/dflash_module, train/objective): the block mask, the anchors, the decayed
// loss, an exact resume, and a trained draft that exports in z-lab's layout, loads in the engine
// with the module's numbers and serves greedy output equal to the target's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cache/kv_cache.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "models/dflash.h"
#include "speculation/spec_setup.h"
#include "support/greedy_check.h"
#include "support/synthetic_dflash.h"
#include "support/train_fixture.h"
#include "tokenizer/tokenizer.h"
#include "train/objective.h"
#include "train/trainer.h"

namespace eaglet {
namespace {

std::vector<float> floats(const torch::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  double mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(double(v)));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], rel * mx) << i;
}

// The engine's block (paged context, one forward) against the training module on the same export.
void expect_engine_matches_module(const std::string& dir, const Model& target) {
  auto draft = DFlashDraft::load(dir, target);
  DFlashModule m = load_dflash_module(dir, target);
  const int P = 9, last = 42, width = int(draft->config().taps.size()) * target.config().hidden;
  const auto feats = test::random_normal(size_t(P * width), 1.0f, 21);
  KvCache cache(draft->kv_shape(8));
  const SeqId seq = cache.create();
  draft->add_context(test::pool(), cache, seq, feats.data(), P);
  std::vector<float> got;
  draft->draft_block(test::pool(), cache, seq, last, &got);
  torch::NoGradGuard ng;
  auto f = torch::from_blob(const_cast<float*>(feats.data()), {1, P, width}, torch::kFloat32);
  auto want = m->forward(m->context(f), torch::tensor({{int64_t(last)}}), torch::tensor({{int64_t(P)}}));
  expect_near(got, floats(want), 1e-4);
}

// A random module of the fixture target's shape (block 8), with random embedding and head.
DFlashModule random_module(const Model& target) {
  const TrainConfig c = TrainConfig::load("", dflash_recipe());
  torch::manual_seed(3);
  DFlashModule m(dflash_module_options(c, target.config()));
  m->embed = torch::randn({target.config().vocab, target.config().hidden});
  m->lm_head = torch::randn({target.config().vocab, target.config().hidden});
  return m;
}

TEST(DFlashTrain, BlocksSeeTheContextBeforeTheirAnchorAndThemselvesOnly) {
  TrainFixture f;
  auto target = load_model(f.target);
  DFlashModule m = random_module(*target);
  torch::NoGradGuard ng;
  const int64_t T = 12;
  auto ctx = torch::randn({1, T, 48});
  auto first = torch::tensor({{5L, 9L}});
  auto both = m->forward(ctx, first, torch::tensor({{3L, 7L}}));
  auto alone = m->forward(ctx, torch::tensor({{9L}}), torch::tensor({{7L}}));
  EXPECT_TRUE(torch::allclose(both.select(1, 1), alone.select(1, 0), 1e-5, 1e-5)) << "blocks see each other";
  // Context rows at or after the anchor are invisible to its block; the row before is not.
  auto later = ctx.clone();
  later.narrow(1, 7, T - 7).normal_();
  EXPECT_TRUE(torch::allclose(m->forward(later, torch::tensor({{9L}}), torch::tensor({{7L}})), alone, 1e-5, 1e-5));
  auto before = ctx.clone();
  before.narrow(1, 6, 1).normal_();
  EXPECT_FALSE(torch::allclose(m->forward(before, torch::tensor({{9L}}), torch::tensor({{7L}})), alone, 1e-3, 1e-3));
}

TEST(DFlashTrain, AnchorsAreSupervisedTokensFollowedByOne) {
  TttBatch b;
  b.ids = torch::zeros({2, 8}, torch::kLong);
  b.loss_mask = torch::tensor({{0.f, 0.f, 1.f, 1.f, 1.f, 0.f, 1.f, 1.f}, {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 0.f, 0.f}});
  b.valid = torch::tensor({{1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f}, {1.f, 1.f, 1.f, 1.f, 1.f, 0.f, 0.f, 0.f}});
  const Anchors all = draw_anchors(b, 0, nullptr);
  // Row 0: a = 2, 3 (4 is followed by an unsupervised token), 6; row 1: 1..3 (a >= 1, a + 1 real).
  EXPECT_EQ(all.pos.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(floats(all.pos.to(torch::kFloat32)), (std::vector<float>{2, 3, 6, 1, 2, 3}));
  EXPECT_TRUE(all.real.all().item<bool>());
  const std::vector<uint64_t> seeds{7, 8};
  const Anchors some = draw_anchors(b, 2, &seeds);
  ASSERT_EQ(some.pos.size(1), 2);
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_LT(some.pos[i][0].item<int64_t>(), some.pos[i][1].item<int64_t>());  // sorted, distinct
    EXPECT_TRUE(some.real[i].all().item<bool>());
  }
  // A row's draw depends on its seed alone, not on the rows beside it.
  TttBatch one = b;
  one.ids = b.ids.narrow(0, 1, 1);
  one.loss_mask = b.loss_mask.narrow(0, 1, 1);
  one.valid = b.valid.narrow(0, 1, 1);
  const std::vector<uint64_t> seed1{8};
  EXPECT_TRUE(torch::equal(draw_anchors(one, 2, &seed1).pos[0], some.pos[1]));
}

TEST(DFlashTrain, LossWeighsSlotKByExpMinusKMinusOneOverGamma) {
  TrainFixture f;
  auto target = load_model(f.target);
  DFlashModule m = random_module(*target);
  const int64_t T = 20, V = target->config().vocab;
  TttBatch b;
  b.ids = torch::randint(3, V, {1, T}, torch::kLong);
  b.aux = torch::randn({1, T, 96});
  b.target_logits = torch::randn({1, T, V});
  b.loss_mask = torch::ones({1, T});
  b.loss_mask[0][0] = 0;
  b.valid = torch::ones({1, T});
  const Anchors a = draw_anchors(b, 0, nullptr);
  const double gamma = 2.5;
  const TttResult r = dflash_forward(m, b, a, gamma);
  double num = 0, den = 0;
  for (size_t k = 0; k < r.step_loss.size(); ++k) {
    const double w = std::exp(-double(k) / gamma);  // slot k + 1
    num += w * r.step_valid[k] * r.step_loss[k];
    den += w * r.step_valid[k];
  }
  EXPECT_NEAR(r.loss.item<double>(), num / den, 1e-4 * num / den);
  EXPECT_NEAR(dflash_denominator(b, a, 8, gamma), den, 1e-6 * den);
  // Slot k of the anchor at a scores x_{a+k}: the last anchors' late slots run off the end.
  EXPECT_EQ(r.step_valid[0], double(a.pos.size(1)));
  EXPECT_LT(r.step_valid[6], r.step_valid[0]);
  EXPECT_GT(r.drafts, 0);
  EXPECT_GE(r.accepted, r.drafts);  // at least the verifier's own token per block
}

TEST(DFlashTrain, TrainsExportsInThePublishedLayoutAndTheEngineServesIt) {
  TrainFixture f;
  const TrainSummary s = run_training(f.config(f.dir.file("run"), dflash_recipe()));
  ASSERT_FALSE(s.export_dir.empty());
  EXPECT_EQ(s.eval_accuracy.size(), 7u);  // slots 1..7 of a block of 8
  EXPECT_GE(s.eval_simulated_acceptance, 1.0);
  const auto j = nlohmann::json::parse(read_text_file(s.export_dir + "/config.json"));
  EXPECT_EQ(j["architectures"][0], "DFlashDraftModel");
  EXPECT_EQ(j["block_size"], 8);
  EXPECT_EQ(j["num_target_layers"], 4);
  EXPECT_EQ(j["dflash_config"]["mask_token_id"], 0);  // the byte tokenizer's <unk>
  EXPECT_EQ(j["dflash_config"]["target_layer_ids"], nlohmann::json({0, 2}));
  const Checkpoint ck = Checkpoint::open_dir(s.export_dir);
  for (const char* name : {"fc.weight", "hidden_norm.weight", "norm.weight", "layers.1.self_attn.q_norm.weight",
                           "layers.0.mlp.down_proj.weight", "layers.1.post_attention_layernorm.weight"})
    EXPECT_TRUE(ck.has(name)) << name;
  EXPECT_FALSE(ck.has("embed_tokens.weight"));
  EXPECT_FALSE(ck.has("lm_head.weight"));
  auto target = load_model(f.target);
  expect_engine_matches_module(s.export_dir, *target);
  // Served: greedy output equal to the target's for chains up to the block.
  Tokenizer tok = Tokenizer::bytes();
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(tok.encode("sample " + std::to_string(i * 3) + ": the cat"));
  SpecOptions o;
  o.method = "dflash";
  o.draft_dir = s.export_dir;
  // (This draft barely trained, so it may accept nothing; DFlash.GreedyOutputIsTheTargets checks
  // that accepted blocks keep the output too.)
  test::expect_greedy_equal(*target, tok, {}, prompts, o, 24, {"k=3", "k=7"});
}

// Sliding-window and causal layers (published variants): the training module computes what the
// engine serves, context window and in-block order included; a recipe trains such a draft, exports
// the layer kinds and serves it losslessly.
TEST(DFlashTrain, SlidingAndCausalLayersTrainAsTheEngineRunsThem) {
  TrainFixture f;
  auto target = load_model(f.target);
  const std::vector<nlohmann::json> variants = test::dflash_attention_variants(96, target->config().num_layers);
  for (size_t i = 1; i < variants.size(); ++i) {
    SCOPED_TRACE(variants[i].dump());
    const std::string dir = f.dir.file("variant" + std::to_string(i));
    test::write_dflash_draft(dir, variants[i]);
    expect_engine_matches_module(dir, *target);
  }
  const TrainSummary s = run_training(f.config(
      f.dir.file("run"), dflash_recipe({"model.draft.layer_types=[sliding_attention,full_attention]",
                                        "model.draft.sliding_window=3", "model.draft.causal=false"})));
  const auto j = nlohmann::json::parse(read_text_file(s.export_dir + "/config.json"));
  EXPECT_EQ(j["layer_types"], nlohmann::json({"sliding_attention", "full_attention"}));
  EXPECT_EQ(j["sliding_window"], 3);
  const auto draft = DFlashDraft::load(s.export_dir, *target);
  ASSERT_EQ(draft->config().layer_attention.size(), 2u);
  EXPECT_TRUE(draft->config().layer_attention[0].sliding);
  EXPECT_FALSE(draft->config().layer_attention[0].causal);
  expect_engine_matches_module(s.export_dir, *target);
  Tokenizer tok = Tokenizer::bytes();
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(tok.encode("story " + std::to_string(i * 7) + ": a dog"));
  SpecOptions o;
  o.method = "dflash";
  o.draft_dir = s.export_dir;
  test::expect_greedy_equal(*target, tok, {}, prompts, o, 24, {"k=7", "topk=2,depth=4,budget=8"});
}

TEST(DFlashTrain, StopAndResumeIsExact) {
  TrainFixture f;
  run_training(f.config(f.dir.file("a"), dflash_recipe()));
  TrainHooks h;
  h.stop_after_steps = 5;
  EXPECT_EQ(run_training(f.config(f.dir.file("b"), dflash_recipe()), h).steps_done, 5);
  run_training(f.config(f.dir.file("b"), dflash_recipe()));
  EXPECT_EQ(read_text_file(f.dir.file("a") + "/export/model.safetensors"),
            read_text_file(f.dir.file("b") + "/export/model.safetensors"));
}

TEST(DFlashTrain, RecipeSettingsAndRefusals) {
  TrainFixture f;
  auto target = load_model(f.target);
  // A published config as draft_model_config sets the type, layers, block and taps.
  const std::string cfg = f.dir.file("dflash.json");
  test::write_text(cfg, nlohmann::json({{"architectures", {"DFlashDraftModel"}}, {"num_hidden_layers", 3},
                                        {"dflash_config", {{"block_size", 10}, {"mask_token_id", 2},
                                                           {"target_layer_ids", {1, 2, 3}}}}}).dump());
  const TrainConfig c = TrainConfig::load("", {"draft_model_config=" + cfg, "model.draft.draft_vocab_size=0"});
  EXPECT_TRUE(c.draft.dflash());
  const DFlashModuleOptions o = dflash_module_options(c, target->config());
  EXPECT_EQ(o.config.num_layers, 3);
  EXPECT_EQ(o.config.block_size, 10);
  EXPECT_EQ(o.config.mask_token_id, 2);
  EXPECT_EQ(o.config.taps, (std::vector<int>{2, 3, 4}));
  // Sliding-window and causal layers come from the published config, as the engine resolves them.
  for (const auto& [key, value, want] :
       {std::tuple<std::string, nlohmann::json, std::string>{"layer_types", {"sliding_attention", "full_attention", "full_attention"}, "S+F-F-"},
        {"is_causal", true, "F+F+F+"}}) {
    nlohmann::json j = nlohmann::json::parse(read_text_file(cfg));
    j[key] = value;
    j["sliding_window"] = 5;
    const std::string path = f.dir.file("dflash-" + key + ".json");
    test::write_text(path, j.dump());
    const DFlashConfig d = dflash_module_options(TrainConfig::load("", {"draft_model_config=" + path}), target->config()).config;
    std::string got;
    for (const auto& l : d.layer_attention) got += std::string(l.sliding ? "S" : "F") + (l.causal ? "+" : "-");
    EXPECT_EQ(got, want) << key;
    EXPECT_EQ(d.sliding_window, key == "layer_types" ? 5 : 0) << key;
  }
  test::expect_mentions(test::error_of([&] {
                          dflash_module_options(TrainConfig::load("", dflash_recipe({"model.draft.layer_types=[sliding_attention]"})),
                                                target->config());
                        }),
                        {"layer_types", "2 layers"});
  test::expect_mentions(test::error_of([] { TrainConfig::load("", dflash_recipe({"model.draft.causal=maybe"})); }),
                        {"model.draft.causal"});
  // SpecForge's and speculators' key names.
  const TrainConfig a = TrainConfig::load("", dflash_recipe({"max_anchors=33", "dflash_decay_gamma=4"}));
  EXPECT_EQ(a.num_anchors, 33);
  EXPECT_EQ(a.loss_decay_gamma, 4.0);
  test::expect_mentions(test::error_of([] { TrainConfig::load("", dflash_recipe({"model.aux_layers=[1,2,3]"})); }),
                        {"model.aux_layers", "target_layer_ids"});
  test::expect_mentions(test::error_of([] { TrainConfig::load("", dflash_recipe({"model.draft.block_size=1"})); }),
                        {"model.draft.block_size"});
  const TrainConfig bad = TrainConfig::load("", dflash_recipe({"model.draft.target_layer_ids=[0,4]"}));
  test::expect_mentions(test::error_of([&] { dflash_module_options(bad, target->config()); }), {"target layer 4"});
  const TrainConfig mask = TrainConfig::load("", dflash_recipe({"model.draft.mask_token_id=900"}));
  test::expect_mentions(test::error_of([&] { dflash_module_options(mask, target->config()); }),
                        {"mask_token_id 900"});
}

}  // namespace
}  // namespace eaglet
