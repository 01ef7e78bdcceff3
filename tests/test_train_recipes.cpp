// Recipes as TorchSpec / SpecForge users write them: their key names as aliases, the nearest key
// suggested on a typo, a draft config.json for the shape, several data files and globs,
// malformed records skipped and counted (up to a limit), data already regenerated used as is,
// `--print-config`, periodic evaluation on an eval file, metrics.jsonl and the curves picture.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/mapped_file.h"
#include "support/synthetic_dflash.h"
#include "support/test_util.h"
#include "support/train_fixture.h"
#include "train/dataset.h"
#include "train/trainer.h"

namespace eaglet {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Recipes, TorchSpecAndSpecForgeKeysAreAliases) {
  test::TempDir d;
  test::write_text(d.file("draft.json"), R"({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 48,
    "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 12,
    "num_hidden_layers": 1, "draft_vocab_size": 64})");
  test::write_text(d.file("torchspec.yaml"),
                   "model:\n  target_model_path: /models/t\n  draft_model_config: " + d.file("draft.json") +
                       "\ndataset:\n  train_data_path: [a.jsonl, 'b/*.jsonl']\n  eval_data_path: e.jsonl\n"
                       "  max_seq_length: 256\n  chat_template: t.jinja\n"
                       "training:\n  learning_rate: 5e-5\n  max_grad_norm: 1.0\n  ttt_length: 6\n"
                       "  micro_batch_size: 2\n  num_epochs: 3\n  save_interval: 50\n  eval_interval: 20\n");
  const TrainConfig c = TrainConfig::load(d.file("torchspec.yaml"), {"seed=5", "max-grad-norm=0.25"});
  EXPECT_EQ(c.target, "/models/t");
  EXPECT_EQ(c.data_path, "a.jsonl,b/*.jsonl");
  EXPECT_EQ(c.eval_path, "e.jsonl");
  EXPECT_EQ(c.max_length, 256);
  EXPECT_EQ(c.chat_template, "t.jinja");
  EXPECT_DOUBLE_EQ(c.lr, 5e-5);
  EXPECT_DOUBLE_EQ(c.grad_clip, 0.25);  // the command line wins, hyphens or not
  EXPECT_EQ(c.ttt_steps, 6);
  EXPECT_EQ(c.micro_batch_size, 2);
  EXPECT_DOUBLE_EQ(c.num_epochs, 3);
  EXPECT_EQ(c.save_every, 50);
  EXPECT_EQ(c.eval_every, 20);
  EXPECT_EQ(c.seed, 5u);
  EXPECT_EQ(c.draft.intermediate, 96);  // from draft_model_config
  EXPECT_EQ(c.draft.num_kv_heads, 2);
  EXPECT_EQ(c.draft.draft_vocab, 64);
  // What --print-config shows loads back to the same configuration.
  test::write_text(d.file("printed.yaml"), c.to_yaml());
  EXPECT_EQ(TrainConfig::load(d.file("printed.yaml"), {}).to_yaml(), c.to_yaml());
}

TEST(Recipes, TyposNameTheNearestKey) {
  EXPECT_NE(error_of([] { TrainConfig::load("", {"training.learnig_rate=1e-4"}); }).find("did you mean 'learning_rate'"),
            std::string::npos);
  EXPECT_NE(error_of([] { TrainConfig::load("", {"training.stesp=4"}); }).find("did you mean 'training.steps'"),
            std::string::npos);
  EXPECT_NE(error_of([] { TrainConfig::load("", {"trainin.batch_size=4"}); }).find("unknown key"), std::string::npos);
  const std::string far = error_of([] { TrainConfig::load("", {"completely_unrelated=1"}); });
  EXPECT_NE(far.find("unknown key 'completely_unrelated'"), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
  test::TempDir d;
  test::write_text(d.file("draft.json"), R"({"hidden_size": 48, "num_hidden_layers": 2})");
  EXPECT_NE(error_of([&] { TrainConfig::load("", {"draft_model_config=" + d.file("draft.json")}); })
                .find("num_hidden_layers 2"),
            std::string::npos);
}

TEST(Recipes, PrintConfigShowsTheResolvedRecipe) {
  auto r = test::run_command(test::eaglet_binary() + " train --print-config learning_rate=0.002 ttt_length=3 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("training.lr: 0.002"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("training.ttt_steps: 3"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " train --print-config learnig_rate=0.002 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("did you mean 'learning_rate'"), std::string::npos) << r.output;
}

TEST(Recipes, SeveralFilesGlobsMalformedRecordsAndRegeneratedData) {
  TrainFixture f;
  // Two regenerated shards (one with two malformed lines) and a glob that finds them.
  std::string a, b;
  for (int i = 0; i < 20; ++i) {
    nlohmann::json j = {{"input_ids", {1 + i, 2, 3, 4, 5, 6}}, {"loss_mask", {0, 1, 1, 1, 1, 1}}};
    (i < 10 ? a : b) += j.dump() + "\n";
  }
  b += "{not json\n";
  b += R"({"input_ids": [1, 2], "loss_mask": [1]})" "\n";
  b += R"({"input_ids": [3, 4, 5], "loss_mask": [1, 1, 1]})" "\n";
  std::filesystem::create_directories(f.dir.file("shards"));
  test::write_text(f.dir.file("shards/part-0.jsonl"), a);
  test::write_text(f.dir.file("shards/part-1.jsonl"), b);
  EXPECT_EQ(expand_data_paths(f.dir.file("shards/*.jsonl")).size(), 2u);
  EXPECT_NE(error_of([&] { expand_data_paths(f.dir.file("shards/*.txt")); }).find("matches no file"), std::string::npos);
  // regen stays on (the default): regenerated files are used as they are.
  const std::string out = f.dir.file("run");
  auto s = run_training(f.config(out, {"data.path=" + f.dir.file("shards/*.jsonl"), "data.eval_samples=4",
                                       "training.steps=4"}));
  EXPECT_EQ(s.steps_done, 4);
  EXPECT_FALSE(std::filesystem::exists(out + "/regen.jsonl"));
  // A limit below the malformed count is an error that names the first bad record.
  const std::string e = error_of([&] {
    run_training(f.config(f.dir.file("strict"), {"data.path=" + f.dir.file("shards/part-1.jsonl"),
                                                  "data.max_bad_records=1", "data.eval_samples=2"}));
  });
  EXPECT_NE(e.find("more than 1 malformed records"), std::string::npos) << e;
  EXPECT_NE(e.find("part-1.jsonl:11"), std::string::npos) << e;
  // Two text files regenerate into one output each, and train together.
  test::write_text(f.dir.file("more.txt"), "one more story about the cat\nand another about the mat\n");
  auto s2 = run_training(f.config(f.dir.file("two"), {"data.path=" + f.data + "," + f.dir.file("more.txt"),
                                                      "training.steps=2"}));
  EXPECT_EQ(s2.steps_done, 2);
  EXPECT_TRUE(std::filesystem::exists(f.dir.file("two") + "/regen.0.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(f.dir.file("two") + "/regen.1.jsonl"));
}

TEST(Recipes, EvalEveryNStepsOnAnEvalFileWritesMetricsAndCurves) {
  TrainFixture f;
  test::write_text(f.dir.file("eval.txt"), "the cat sat on the mat 7\nthe dog sat on the log 9\nsample 3: the cat\n");
  const std::string out = f.dir.file("run");
  auto s = run_training(f.config(out, {"data.eval_path=" + f.dir.file("eval.txt"), "training.eval_every=4",
                                       "training.num_epochs=1"}));
  // 60 samples, none held out (an eval file is given), batch 4: 15 steps for one epoch.
  EXPECT_EQ(s.steps_done, 15);
  std::istringstream in(read_text_file(out + "/metrics.jsonl"));
  std::string line;
  std::vector<int64_t> train_steps, eval_steps;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["kind"] == "train") {
      train_steps.push_back(j["step"].get<int64_t>());
      EXPECT_EQ(j["accuracy"].size(), 2u);
      for (const char* k : {"loss", "lr", "tokens_per_second", "samples_per_second", "queue_depth", "trainer_busy",
                            "simulated_acceptance"})
        EXPECT_TRUE(j.contains(k)) << k;
    } else if (j["kind"] == "eval") {
      eval_steps.push_back(j["step"].get<int64_t>());
      EXPECT_GE(j["simulated_acceptance"].get<double>(), 1.0);
    }
  }
  EXPECT_EQ(train_steps, (std::vector<int64_t>{4, 8, 12, 15}));
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{4, 8, 12, 15}));
  const std::string svg = read_text_file(out + "/curves.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("held-out eval"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

// train and regen end with one JSON object for scripts (--json), the figures of the summary line.
TEST(Recipes, TrainAndRegenSummariesAsJson) {
  TrainFixture f;
  auto r = test::run_command(test::eaglet_binary() + " regen -m " + f.target + " --data " + f.data + " -o " + f.dir.file("re.jsonl") +
                             " --num-samples 5 --max-new-tokens 4 --prefix-tokens 4 --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto regen = nlohmann::json::parse(r.output);
  EXPECT_EQ(regen["samples"], 5);
  EXPECT_EQ(regen["output"], f.dir.file("re.jsonl"));
  EXPECT_GE(regen["wall_seconds"].get<double>(), 0);
  r = test::run_command(f.command(f.dir.file("run")) + " --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto train = nlohmann::json::parse(r.output.substr(r.output.rfind("\n{") == std::string::npos ? 0 : r.output.rfind("\n{") + 1));
  EXPECT_EQ(train["steps"], 12);
  EXPECT_EQ(train["finished"], true);
  EXPECT_EQ(train["export_dir"], f.dir.file("run") + "/export");
  EXPECT_EQ(train["eval_accuracy"].size(), 2u);  // one per TTT step
  EXPECT_GT(train["eval_simulated_acceptance"].get<double>(), 1.0);
  EXPECT_TRUE(std::filesystem::exists(train["metrics"].get<std::string>()));
}

// The draft inherits the target's RoPE base, as TorchSpec and SpecForge do (it used to be trained
// and exported at 10000 whatever the target's), unless the recipe sets model.draft.rope_theta.
TEST(Recipes, DraftInheritsTheTargetsRopeTheta) {
  TrainFixture f;
  auto cfg = nlohmann::json::parse(std::ifstream(f.target + "/config.json"));
  cfg["rope_theta"] = 500000.0;
  test::write_text(f.target + "/config.json", cfg.dump());
  auto exported_theta = [&](const std::string& out, std::vector<std::string> extra) {
    extra.push_back("training.steps=2");
    run_training(f.config(f.dir.file(out), extra));
    return nlohmann::json::parse(std::ifstream(f.dir.file(out) + "/export/config.json"))["rope_theta"].get<double>();
  };
  EXPECT_EQ(exported_theta("inherit", {}), 500000.0);
  // Taps: vLLM's numbering at the top level, SGLang's (one less) under eagle_config.
  const auto exported = nlohmann::json::parse(std::ifstream(f.dir.file("inherit") + "/export/config.json"));
  std::vector<int> top = exported["eagle_aux_hidden_state_layer_ids"], nested = exported["eagle_config"]["eagle_aux_hidden_state_layer_ids"];
  for (int& j : top) j -= 1;
  EXPECT_EQ(nested, top);
  EXPECT_EQ(exported_theta("override", {"model.draft.rope_theta=10000"}), 10000.0);
  EXPECT_EQ(exported["eaglet_training"]["loss_mask_alignment"], "torchspec");
  EXPECT_EQ(exported["eaglet_training"]["rope_theta_from"], "target");
  const auto overridden = nlohmann::json::parse(std::ifstream(f.dir.file("override") + "/export/config.json"));
  EXPECT_EQ(overridden["eaglet_training"]["rope_theta_from"], "model.draft.rope_theta");
}

// A scaled target's RoPE (llama3, linear) is trained with and exported, as TorchSpec and SpecForge
// inherit it; it used to be dropped with a warning (plain RoPE at the target's base).
TEST(Recipes, DraftInheritsTheTargetsRopeScaling) {
  TrainFixture f;
  for (const nlohmann::json& scaling :
       {nlohmann::json{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}},
        nlohmann::json{{"type", "linear"}, {"factor", 2.0}}}) {
    auto cfg = nlohmann::json::parse(std::ifstream(f.target + "/config.json"));
    cfg["rope_scaling"] = scaling;
    test::write_text(f.target + "/config.json", cfg.dump());
    auto target = load_model(f.target);
    const auto o = draft_module_options(f.config(f.dir.file("x")), target->config());
    const Rope want = Rope::from_config(JsonConfig(cfg, "target"), target->config().head_dim);
    EXPECT_EQ(o.rope.inv_freq, want.inv_freq) << scaling.dump();
    EXPECT_EQ(o.rope.position_scale, want.position_scale) << scaling.dump();
    const std::string out = f.dir.file(scaling.value("rope_type", "linear"));
    run_training(f.config(out, {"training.steps=2"}));
    const auto exported = nlohmann::json::parse(std::ifstream(out + "/export/config.json"));
    EXPECT_EQ(exported["rope_scaling"], scaling);
    // The engine reads the exported draft with the same frequencies the trainer used.
    const JsonConfig ecfg = JsonConfig::load(out + "/export/config.json");
    const Rope loaded = Rope::from_config(ecfg, ecfg.get_size("head_dim"));
    EXPECT_EQ(loaded.inv_freq, o.rope.inv_freq);
    EXPECT_EQ(loaded.position_scale, o.rope.position_scale);
  }
}

// The main job end to end on a tiny target: training, widening target and drafts (a small wide
// shape here; TinyLlama's by default; a DFlash draft given with --dflash-draft too), the
// benchmark table, demo.json and demo.svg. Greedy output with any proposer must equal plain
// decoding, and the drafts must have been used.
TEST(Demo, TrainsWidensBenchmarksAndDraws) {
  TrainFixture f;
  const std::string out = f.dir.file("demo"), dflash = f.dir.file("dflash");
  test::write_dflash_draft(dflash, test::dflash_draft_config());
  auto r = test::run_command(test::eaglet_binary() + " demo -m " + f.target + " --data " + f.data + " --output " + out +
                             " --steps 8 --num-samples 40 --eval-prompts 3 --max-tokens 8 --threads 2 --dflash-draft " +
                             dflash + " --widen hidden=96,heads=8,kv_heads=2,head_dim=32,intermediate=160,layers=6 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* m : {"target only", "n-gram lookup", "EAGLE-3, chain of 3", "EAGLE-3, auto shape",
                        "EAGLE-3 auto, Q8_0 draft", "DFlash, chain of 7", "DFlash, auto shape"})
    EXPECT_NE(r.output.find(m), std::string::npos) << m << "\n" << r.output;
  const auto wide = nlohmann::json::parse(std::ifstream(out + "/wide-target/config.json"));
  EXPECT_EQ(wide["hidden_size"], 96);
  EXPECT_EQ(wide["num_hidden_layers"], 6);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(out + "/wide-dflash/config.json"))["hidden_size"], 96);
  const auto report = nlohmann::json::parse(std::ifstream(out + "/demo.json"));
  ASSERT_EQ(report["methods"].size(), 7u);
  EXPECT_EQ(report["prompts"], 3);
  for (auto& m : report["methods"]) {
    EXPECT_EQ(m["identical"], 3) << m.dump();
    EXPECT_GT(m["tokens_per_second"].get<double>(), 0) << m.dump();
  }
  EXPECT_EQ(report["methods"][2]["acceptance_by_position"].size(), 3u);
  EXPECT_GT(report["methods"][2]["drafted_tokens"].get<int64_t>(), 0);  // the wide draft ran
  EXPECT_GT(report["methods"][5]["drafted_tokens"].get<int64_t>(), 0);  // and the wide DFlash draft
  std::ifstream svg(out + "/demo.svg");
  const std::string picture((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(picture.find("<svg"), std::string::npos);
  EXPECT_NE(picture.find("EAGLE-3"), std::string::npos);
  EXPECT_NE(picture.find("</svg>"), std::string::npos);

  r = test::run_command(test::eaglet_binary() + " demo -m " + f.target + " --output " + out + " --widen hidden=96,layers=x 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--widen: layers needs an integer"), std::string::npos) << r.output;
  r = test::run_command(test::eaglet_binary() + " demo -m " + f.target + " --output " + out + " --dflash-draft " + out +
                        "/nowhere 2>&1");
  EXPECT_NE(r.exit_code, 0);
  test::expect_mentions(r.output, {"--dflash-draft", "nowhere", "config.json"});
}

}  // namespace
}  // namespace eaglet
