#include "support/train_fixture.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cache/kv_cache.h"
#include "models/eagle3.h"
#include "train/trainer.h"

namespace eaglet {

TrainFixture::TrainFixture() {
  target = dir.file("target");
  test::write_byte_vocab_target(target);
  data = dir.file("data.txt");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "sample " + std::to_string(i) + ": the cat sat on the mat " + std::to_string(i * 7) + "\n";
  test::write_text(data, text);
}

std::vector<std::string> TrainFixture::overrides(const std::string& out, std::vector<std::string> extra) const {
  std::vector<std::string> o = {"output_dir=" + out, "model.target=" + target, "data.path=" + data,
                                "data.eval_samples=6", "regen.max_new_tokens=12", "regen.prefix_tokens=4",
                                "training.ttt_steps=2", "training.batch_size=4", "training.steps=12",
                                "training.lr=0.003", "training.save_every=4", "training.log_every=4",
                                "model.draft.draft_vocab_size=64", "inference.worker_timeout_s=3"};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

TrainConfig TrainFixture::config(const std::string& out, std::vector<std::string> extra) const {
  return TrainConfig::load("", overrides(out, std::move(extra)));
}

std::string TrainFixture::command(const std::string& out, std::vector<std::string> extra) const {
  std::string cmd = test::eaglet_binary() + " train";
  for (auto& kv : overrides(out, std::move(extra))) cmd += " " + kv;
  return cmd;
}

std::vector<std::string> dflash_recipe(std::vector<std::string> extra) {
  std::vector<std::string> o = {"model.draft.type=dflash", "model.draft.draft_vocab_size=0",
                                "model.draft.num_hidden_layers=2", "model.draft.block_size=8",
                                "model.draft.target_layer_ids=[0,2]", "training.num_anchors=6"};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

void expect_engine_matches_module(const std::string& draft_dir, const Model& target, const Eagle3Draft& draft) {
  const int T = 11, H = draft.config().hidden, Ht = draft.config().target_hidden;
  std::vector<int> tokens;
  for (int i = 0; i < T; ++i) tokens.push_back((i * 31 + 7) % 259);
  auto aux = test::random_normal(size_t(T * 3 * Ht), 1.0f, 9);
  const TorchDraftStep want = torch_draft_step(draft_dir, target, tokens, aux);
  KvCache cache(draft.kv_shape(2));
  SeqId seq = cache.create();
  std::vector<float> g(size_t(T * H)), next(size_t(T * H)), got;
  draft.fuse_aux(test::pool(), aux.data(), T, g.data());
  draft.forward(test::pool(), cache, {Eagle3Rows{seq, tokens}}, g.data(), next.data(), &got, true);
  auto expect_near = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double mx = 0;
    for (float v : want) mx = std::max(mx, std::fabs(double(v)));
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * mx) << what << " " << i;
  };
  expect_near(got, want.logits, "logits");
  expect_near(next, want.next, "next state");
}

}  // namespace eaglet
