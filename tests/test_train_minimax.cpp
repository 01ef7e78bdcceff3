// The trainer on a synthetic MiniMax-M3 target with chat data: the exported draft loads and
// decodes losslessly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/model_bundle.h"
#include "models/eagle3.h"
#include "speculation/eagle3_proposer.h"
#include "support/greedy_check.h"
#include "support/minimax_fixture.h"
#include "support/test_util.h"
#include "train/trainer.h"

namespace eaglet {
namespace {

TEST(MiniMaxSpeculative, TrainerTrainsADraftOnChatDataThatLoadsAndRuns) {
  if (!test::python_numpy_available()) GTEST_SKIP() << "needs /usr/bin/python3 with numpy (apt: python3-numpy)";
  test::TempDir dir;
  const std::string target = dir.file("target");
  test::write_synthetic_minimax(target, "m3", "mxfp8");
  std::string chat;
  for (int i = 0; i < 24; ++i)
    chat += nlohmann::json{{"messages", {{{"role", "user"}, {"content", "count to " + std::to_string(i)}},
                                         {{"role", "assistant"}, {"content", "1 2 3 " + std::to_string(i)},
                                          {"reasoning_content", "easy"}}}}}.dump() + "\n";
  test::write_text(dir.file("chat.jsonl"), chat);
  const TrainConfig cfg = TrainConfig::load(
      "", {"output_dir=" + dir.file("run"), "model.target=" + target, "data.path=" + dir.file("chat.jsonl"),
           "model.aux_layers=[1, 3, 5]", "model.draft.num_attention_heads=2", "model.draft.num_key_value_heads=2",
           "model.draft.head_dim=128", "model.draft.intermediate_size=256", "model.draft.draft_vocab_size=128",
           "data.eval_samples=4", "regen.enabled=true", "regen.max_new_tokens=8", "training.ttt_steps=2",
           "training.batch_size=4", "training.steps=6", "training.save_every=3", "training.log_every=3",
           "inference.worker_timeout_s=3"});
  const TrainSummary s = run_training(cfg);
  EXPECT_EQ(s.steps_done, 6);
  ASSERT_FALSE(s.export_dir.empty());
  ModelBundle b = load_bundle(target);
  auto draft = Eagle3Draft::load(s.export_dir, *b.model);
  EXPECT_EQ(draft->config().aux_layers, (std::vector<int>{1, 3, 5}));
  const auto prompts = test::byte_prompts(2, 60);
  SpecOptions eagle;
  eagle.draft_dir = s.export_dir;
  test::expect_greedy_equal(*b.model, b.tokenizer, {}, prompts, eagle, 16, {"k=3"});
}

}  // namespace
}  // namespace eaglet
