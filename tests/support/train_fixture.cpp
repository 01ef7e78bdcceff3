#include "support/train_fixture.h"

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

}  // namespace eaglet
