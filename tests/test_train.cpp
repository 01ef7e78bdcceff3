// The trainer: TTT attention and loss against direct computation, the libtorch draft against
// eaglet's inference draft, vocabulary pruning, export round trip, exact resume after a kill,
// and the ZeroMQ multi-process pipeline (including a worker that dies).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/free_port.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "models/eagle3.h"
#include "support/test_util.h"
#include "support/train_fixture.h"
#include "train/draft_export.h"
#include "train/draft_module.h"
#include "train/trainer.h"
#include "train/vocab_mapping.h"

namespace eaglet {
namespace {

TEST(Ttt, AttentionIsCausalOverStepZeroPlusDiagonal) {
  torch::manual_seed(1);
  const int64_t B = 2, nh = 4, nkv = 2, T = 5, hd = 3, steps = 3;
  auto q = torch::randn({B, nh, T, hd});
  std::vector<torch::Tensor> keys, values;
  for (int i = 0; i < steps; ++i) {
    keys.push_back(torch::randn({B, nkv, T, hd}));
    values.push_back(torch::randn({B, nkv, T, hd}));
  }
  auto got = ttt_attention(q, keys, values);
  // Direct: query (b, h, t) sees K_0[0..t] and K_j[t] for j >= 1.
  auto qa = q.accessor<float, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t kv = h / (nh / nkv);
        std::vector<double> s;
        std::vector<const float*> vrows;
        auto score = [&](const torch::Tensor& k, int64_t pos) {
          double d = 0;
          for (int64_t x = 0; x < hd; ++x) d += double(qa[b][h][t][x]) * k[b][kv][pos][x].item<float>();
          return d / std::sqrt(double(hd));
        };
        for (int64_t p = 0; p <= t; ++p) s.push_back(score(keys[0], p));
        for (int j = 1; j < steps; ++j) s.push_back(score(keys[size_t(j)], t));
        double mx = *std::max_element(s.begin(), s.end()), z = 0;
        for (auto& v : s) z += (v = std::exp(v - mx));
        for (int64_t x = 0; x < hd; ++x) {
          double o = 0;
          size_t i = 0;
          for (int64_t p = 0; p <= t; ++p) o += s[i++] / z * values[0][b][kv][p][x].item<float>();
          for (int j = 1; j < steps; ++j) o += s[i++] / z * values[size_t(j)][b][kv][t][x].item<float>();
          EXPECT_NEAR(got[b][h][t][x].item<float>(), o, 1e-5);
        }
      }
}

DraftModuleOptions tiny_options() {
  Eagle3Config c;
  c.hidden = c.target_hidden = 16;
  c.intermediate = 24;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.vocab = 20;
  c.draft_vocab = 12;
  return {c, Rope::from_config(JsonConfig(nlohmann::json::object(), "tiny draft"), c.head_dim)};
}

TEST(Ttt, LossMatchesDirectComputation) {
  torch::manual_seed(2);
  DraftModule m(tiny_options());
  {
    torch::NoGradGuard ng;
    m->embed.normal_();
  }
  const int64_t B = 2, T = 7, V = 20;
  TttBatch b;
  b.ids = torch::randint(0, V, {B, T}, torch::kLong);
  b.aux = torch::randn({B, T, 48});
  b.target_logits = torch::randn({B, T, V}) * 3;
  b.loss_mask = torch::ones({B, T});
  b.loss_mask[1][2] = 0;
  std::vector<int64_t> d2t_ids = {0, 1, 2, 3, 5, 7, 8, 11, 13, 14, 17, 19};
  auto d2t = torch::tensor(d2t_ids, torch::kLong);
  auto in_draft = torch::zeros({V}, torch::kBool);
  for (auto i : d2t_ids) in_draft[i] = true;
  auto res = ttt_forward(m, b, 2, 0.8, d2t, in_draft);

  // Step 0 by hand: index t uses token t+1, is scored against the target at t+1, counted when
  // loss_mask[t] is set (TorchSpec/SpecForge's alignment) and the target's argmax at t+1 is in the
  // draft vocabulary.
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> keys, values;
  auto ids = torch::cat({b.ids.narrow(1, 1, T - 1), torch::zeros({B, 1}, torch::kLong)}, 1);
  auto [logits, out] = m->step(ids, m->fuse(b.aux), 0, keys, values);
  double total = 0, count = 0, correct = 0;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t t = 0; t + 1 < T; ++t) {
      auto tl = b.target_logits[i][t + 1];
      if (b.loss_mask[i][t].item<float>() == 0 || !in_draft[tl.argmax().item<int64_t>()].item<bool>()) continue;
      auto p = torch::softmax(tl.index_select(0, d2t), 0);
      auto lq = torch::log_softmax(logits[i][t], 0);
      total += -(p * lq).sum().item<double>();
      count += 1;
      correct += logits[i][t].argmax().item<int64_t>() == tl.index_select(0, d2t).argmax().item<int64_t>();
    }
  ASSERT_GT(count, 0);
  EXPECT_NEAR(res.step_loss[0], total / count, 1e-5);
  EXPECT_EQ(res.step_valid[0], count);
  EXPECT_EQ(res.step_correct[0], correct);
  EXPECT_NEAR(res.loss.item<double>(), res.step_loss[0] + 0.8 * res.step_loss[1], 1e-5);
  EXPECT_LT(res.step_valid[1], res.step_valid[0] + 1);  // step 1 loses the last position
}

// TorchSpec and SpecForge score TTT index t (which predicts x_{t+2}) when loss_mask[t] is set; the
// mask used to be shifted left by one, so each span's boundary positions differed. Positions whose
// target lies past the sequence end are never scored.
TEST(Ttt, LossMaskAlignedWithTorchSpec) {
  TttBatch b;
  b.loss_mask = torch::tensor({0.f, 0.f, 1.f, 1.f, 1.f, 0.f, 1.f, 1.f, 0.f}).view({1, 9});
  b.valid = torch::tensor({1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 0.f}).view({1, 9});  // one padding token
  auto v = [](const torch::Tensor& t) {
    auto c = t.reshape({-1}).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  };
  EXPECT_EQ(v(ttt_step_mask(b, 0)), (std::vector<float>{0, 0, 1, 1, 1, 0, 1, 0, 0}));  // index 7's target is padding
  EXPECT_EQ(v(ttt_step_mask(b, 1)), (std::vector<float>{0, 1, 1, 1, 0, 1, 0, 0, 0}));
  b.alignment = LossMaskAlignment::NextToken;
  EXPECT_EQ(v(ttt_step_mask(b, 0)), (std::vector<float>{0, 1, 1, 1, 0, 1, 1, 0, 0}));
}

TEST(VocabMapping, TopTokensAscendingWithOffsets) {
  std::vector<TrainSample> s(1);
  s[0].ids = {5, 5, 5, 2, 2, 9, 9, 9, 9, 1};
  s[0].loss_mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0};  // token 1 is not counted
  auto m = build_vocab_mapping(s, 12, 3);
  EXPECT_EQ(m.draft_to_target(), (std::vector<int>{2, 5, 9}));
  EXPECT_EQ(m.d2t, (std::vector<int64_t>{2, 4, 7}));
  EXPECT_EQ(m.t2d[9], 1);
  EXPECT_EQ(m.t2d[1], 0);
  // Too few distinct tokens: padded with unused ids, lowest first.
  auto pad = build_vocab_mapping(s, 12, 5);
  EXPECT_EQ(pad.draft_to_target(), (std::vector<int>{0, 1, 2, 5, 9}));
  EXPECT_THROW(build_vocab_mapping(s, 12, 13), Error);
}

std::string export_bytes(const std::string& dir) { return read_text_file(dir + "/export/model.safetensors"); }

TEST(Trainer, ExportLoadsAndMatchesTheInferenceDraft) {
  TrainFixture f;
  TrainSummary s = run_training(f.config(f.dir.file("run")));
  ASSERT_EQ(s.export_dir, f.dir.file("run") + "/export");
  auto target = load_model(f.target);
  auto draft = Eagle3Draft::load(s.export_dir, *target);
  EXPECT_EQ(draft->config().draft_vocab, 64);
  EXPECT_EQ(draft->config().aux_layers, (std::vector<int>{1, 2, 2}));  // default (2, L/2, L-3) for L = 4, sorted
  expect_engine_matches_module(s.export_dir, *target, *draft);
  // vLLM key style loads the same.
  auto cfg = f.config(f.dir.file("run"), {"export.key_style=vllm"});
  auto j = nlohmann::json::parse(read_text_file(s.export_dir + "/config.json"));
  EXPECT_EQ(j["architectures"][0], "LlamaForCausalLMEagle3");
  EXPECT_EQ(j["draft_vocab_size"], 64);
  Checkpoint ck = Checkpoint::open_dir(s.export_dir);
  EXPECT_TRUE(ck.has("midlayer.self_attn.q_proj.weight"));
  EXPECT_TRUE(ck.has("d2t"));
  EXPECT_TRUE(ck.has("t2d"));
  EXPECT_GT(s.stream.produced, 0);
  EXPECT_EQ(s.steps_done, 12);
}

// EAGLE-3.1, the MiniMax-M3 draft's flavour: per-tap norms before fc and the normed output fed
// back. Trained, exported with its flags and fc_norm tensors, loaded by the engine as that
// flavour, and the same numbers as the module, fed-back state included.
TEST(Trainer, Eagle31TrainsExportsAndMatchesTheInferenceDraft) {
  TrainFixture f;
  TrainSummary s = run_training(f.config(f.dir.file("run31"), {"model.draft.type=eagle3.1"}));
  auto target = load_model(f.target);
  auto draft = Eagle3Draft::load(s.export_dir, *target);
  EXPECT_TRUE(draft->config().fc_norm);
  EXPECT_TRUE(draft->config().norm_output);
  EXPECT_TRUE(draft->config().feeds_back_norm());
  Checkpoint ck = Checkpoint::open_dir(s.export_dir);
  ASSERT_TRUE(ck.has("fc_norm.2.weight"));
  const TensorInfo& n = ck.get("fc_norm.0.weight", {48});
  std::vector<float> w(48);
  kernels::to_f32(n.dtype, n.data, w.data(), 48);
  EXPECT_TRUE(std::any_of(w.begin(), w.end(), [](float v) { return v != 1.0f; })) << "fc_norm was not trained";
  expect_engine_matches_module(s.export_dir, *target, *draft);
  // A plain recipe with the flags spelled out is the same flavour.
  const TrainConfig c = TrainConfig::load("", {"model.draft.fc_norm=true", "model.draft.norm_output=true"});
  const auto o = draft_module_options(c, target->config());
  EXPECT_TRUE(o.config.fc_norm && o.config.norm_output);
  EXPECT_THROW(TrainConfig::load("", {"model.draft.type=eagle4"}), Error);
}

TEST(Trainer, ResumeAfterKillGivesTheSameWeights) {
  TrainFixture f;
  // 40 steps, so the kill lands well before the end.
  run_training(f.config(f.dir.file("straight"), {"training.steps=40"}));
  // Kill -9 a real `eaglet train` after its first checkpoint, then run it again to the end.
  const std::string out = f.dir.file("killed");
  const std::string cmd = f.command(out, {"training.steps=40"});
  auto r = test::run_command("(" + cmd + " >/dev/null 2>&1 & pid=$!; for i in $(seq 1 600); do "
                             "[ -f " + out + "/checkpoint/state.json ] && break; sleep 0.01; done; kill -9 $pid; "
                             "wait $pid; echo killed)");
  ASSERT_NE(r.output.find("killed"), std::string::npos);
  ASSERT_TRUE(std::filesystem::exists(out + "/checkpoint/state.json"));
  auto state = nlohmann::json::parse(read_text_file(out + "/checkpoint/state.json"));
  EXPECT_LT(state["step"].get<int>(), 40) << "the run finished before the kill; the test proves nothing";
  r = test::run_command(cmd + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_EQ(export_bytes(out), export_bytes(f.dir.file("straight")));
}

TEST(Trainer, StopAndResumeInProcessIsExact) {
  TrainFixture f;
  run_training(f.config(f.dir.file("a")));
  TrainHooks h;
  h.stop_after_steps = 5;
  auto first = run_training(f.config(f.dir.file("b")), h);
  EXPECT_EQ(first.steps_done, 5);
  EXPECT_TRUE(first.export_dir.empty());
  run_training(f.config(f.dir.file("b")));
  EXPECT_EQ(export_bytes(f.dir.file("a")), export_bytes(f.dir.file("b")));
}

TEST(Trainer, ZeroMqWorkersTrainTheSameDraftAndSurviveADeadWorker) {
  TrainFixture f;
  run_training(f.config(f.dir.file("threads")));
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(free_local_port());
  // Two workers; the first vanishes after 3 samples without a word while holding work, and the
  // second joins a little later. The dead worker's in-flight sample is reassigned after the timeout.
  std::thread workers([&] {
    test::run_command(test::eaglet_binary() + " infer-worker --threads 1 -m " + f.target + " --connect " + endpoint +
                      " --exit-after 3 >/dev/null 2>&1 & sleep 1; " + test::eaglet_binary() +
                      " infer-worker --threads 1 -m " + f.target + " --connect " + endpoint + " >/dev/null 2>&1; wait");
  });
  auto s = run_training(f.config(f.dir.file("zmq"), {"inference.mode=zmq", "inference.endpoint=" + endpoint}));
  workers.join();
  EXPECT_EQ(s.steps_done, 12);
  EXPECT_GE(s.stream.reassigned, 1) << "the dying worker's work was never reassigned";
  EXPECT_EQ(export_bytes(f.dir.file("zmq")), export_bytes(f.dir.file("threads")));
}

TEST(Trainer, Bf16ComputeKeepsFp32MasterWeights) {
  TrainFixture f;
  auto fp32 = run_training(f.config(f.dir.file("fp32")));
  auto bf16 = run_training(f.config(f.dir.file("bf16"), {"training.bf16=true"}));
  EXPECT_EQ(bf16.steps_done, 12);
  // Same data and init: BF16 matmuls change the numbers a little, not the outcome.
  EXPECT_NE(export_bytes(f.dir.file("bf16")), export_bytes(f.dir.file("fp32")));
  ASSERT_EQ(bf16.eval_accuracy.size(), fp32.eval_accuracy.size());
  for (size_t i = 0; i < bf16.eval_accuracy.size(); ++i) EXPECT_NEAR(bf16.eval_accuracy[i], fp32.eval_accuracy[i], 0.1);
  // The exported weights are FP32 masters.
  auto j = nlohmann::json::parse(read_text_file(f.dir.file("bf16") + "/export/config.json"));
  EXPECT_EQ(j["torch_dtype"], "float32");
  auto target = load_model(f.target);
  EXPECT_NO_THROW(Eagle3Draft::load(bf16.export_dir, *target));
}

TEST(Trainer, NoWorkersStopsCleanlyInsteadOfHanging) {
  TrainFixture f;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_training(f.config(f.dir.file("none"), {"inference.mode=zmq", "inference.endpoint=tcp://127.0.0.1:*",
                                                "inference.worker_timeout_s=1"}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no inference worker"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60);
}

TEST(TrainConfig, YamlOverridesAndErrors) {
  test::TempDir d;
  test::write_text(d.file("c.yaml"), "training:\n  steps: 7\n  lr: 0.5\nmodel:\n  aux_layers: [1, 2, 3]\n");
  auto c = TrainConfig::load(d.file("c.yaml"), {"steps=9", "model.lm_head=train"});
  EXPECT_EQ(c.steps, 9);
  EXPECT_DOUBLE_EQ(c.lr, 0.5);
  EXPECT_EQ(c.aux_layers, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(c.lm_head, "train");
  test::write_text(d.file("bad.yaml"), "training:\n  stepz: 7\n");
  try {
    TrainConfig::load(d.file("bad.yaml"), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'training.stepz'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(TrainConfig::load("", {"training.steps=abc"}), Error);
  EXPECT_THROW(TrainConfig::load("", {"model.lm_head=shared"}), Error);
}

}  // namespace
}  // namespace eaglet

namespace eaglet {
namespace {

TEST(Trainer, TrainsOnChatDataWithAndWithoutRegeneration) {
  TrainFixture f;
  test::write_byte_vocab_target(f.target, /*chat_template=*/true);
  std::string chat;
  for (int i = 0; i < 30; ++i)
    chat += nlohmann::json{{"messages", {{{"role", "user"}, {"content", "count to " + std::to_string(i)}},
                                         {{"role", "assistant"}, {"content", "1 2 3 " + std::to_string(i)}}}}}.dump() + "\n";
  const std::string data = f.dir.file("chat.jsonl");
  test::write_text(data, chat);
  for (const char* regen : {"regen.enabled=false", "regen.enabled=true"}) {
    const std::string out = f.dir.file(std::string("chat-") + regen);
    auto s = run_training(f.config(out, {"data.path=" + data, regen, "training.steps=4"}));
    EXPECT_EQ(s.steps_done, 4);
    EXPECT_FALSE(s.export_dir.empty());
  }
}

}  // namespace
}  // namespace eaglet
