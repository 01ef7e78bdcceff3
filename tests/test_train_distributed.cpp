// Data-parallel training over c10d (Gloo on loopback): two ranks train the weights one rank
// trains on the same global batch; a rank killed with -9 makes the other stop naming it, and the
// run resumes; a checkpoint written by two ranks resumes on one; ZeRO-1 ownership is balanced.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/free_port.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "kernels/ops.h"
#include "support/test_util.h"
#include "support/train_fixture.h"
#include "train/distributed.h"
#include "train/trainer.h"

namespace eaglet {
namespace {

// Largest |a - b| over every tensor of two exported drafts (same names and shapes required).
double max_abs_diff(const std::string& a_dir, const std::string& b_dir) {
  Checkpoint a = Checkpoint::open_dir(a_dir), b = Checkpoint::open_dir(b_dir);
  double mx = 0;
  for (const std::string& name : a.names()) {
    const TensorInfo& x = a.get(name);
    EXPECT_TRUE(b.has(name)) << name;
    if (!b.has(name)) continue;
    const TensorInfo& y = b.get(name);
    EXPECT_EQ(x.shape, y.shape) << name;
    if (x.numel() != y.numel() || x.dtype == DType::I64 || x.dtype == DType::BOOL) continue;
    std::vector<float> fx(size_t(x.numel())), fy(size_t(y.numel()));
    kernels::to_f32(x.dtype, x.data, fx.data(), x.numel());
    kernels::to_f32(y.dtype, y.data, fy.data(), y.numel());
    for (size_t i = 0; i < fx.size(); ++i) mx = std::max(mx, std::fabs(double(fx[i]) - double(fy[i])));
  }
  return mx;
}

std::vector<nlohmann::json> metrics_lines(const std::string& path, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_text_file(path));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      auto j = nlohmann::json::parse(line);
      if (j.value("kind", "") == kind) out.push_back(j);
    }
  return out;
}

TEST(DataParallel, TwoRanksTrainTheWeightsOfOneRank) {
  TrainFixture f;
  const std::vector<std::string> recipe{"training.steps=40", "training.threads=1", "inference.threads=1",
                                        "training.eval_every=20", "training.dist_timeout_s=20"};
  run_training(f.config(f.dir.file("one"), recipe));
  auto r = test::run_command(f.command(f.dir.file("two"), recipe) + " --nproc-per-node 2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 rank(s), 4 samples per step (2 per rank)"), std::string::npos) << r.output;
  const double diff = max_abs_diff(f.dir.file("one") + "/export", f.dir.file("two") + "/export");
  EXPECT_LE(diff, 1e-4) << "2 ranks drifted from 1 rank";
  RecordProperty("max_abs_diff", std::to_string(diff));
  // Both ranks narrate through rank 0 only; rank 0 wrote the metrics, with ZeRO-1 halving the
  // optimiser state of each rank against replicated AdamW.
  const auto mem = metrics_lines(f.dir.file("two") + "/metrics.jsonl", "memory");
  ASSERT_GE(mem.size(), 2u);
  const auto shares = mem[0]["optimizer_state_mb_per_rank"].get<std::vector<double>>();
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_NEAR(shares[0] + shares[1], mem[0]["optimizer_state_mb_replicated"].get<double>(), 1e-6);
  EXPECT_GT(shares[0], 0);
  EXPECT_GT(shares[1], 0);
  EXPECT_EQ(mem.back()["peak_rss_mb_per_rank"].size(), 2u);
  EXPECT_EQ(metrics_lines(f.dir.file("two") + "/metrics.jsonl", "train").size(), 10u);  // log_every 4
  EXPECT_EQ(metrics_lines(f.dir.file("two") + "/metrics.jsonl", "eval").size(), 2u);   // step 20 and the end
  EXPECT_TRUE(std::filesystem::exists(f.dir.file("two") + "/curves.svg"));
  // Replicated AdamW (no ZeRO-1) trains the same weights too, checkpoints included (a mismatch
  // in who broadcasts the optimiser state used to deadlock the first checkpoint here).
  auto recipe0 = recipe;
  recipe0.push_back("training.zero_stage=0");
  r = test::run_command(f.command(f.dir.file("two0"), recipe0) + " --nproc-per-node 2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LE(max_abs_diff(f.dir.file("one") + "/export", f.dir.file("two0") + "/export"), 1e-4);
}

// A DFlash draft too: each sample's anchors depend on its place in the run, not on which rank
// holds it, and the loss denominator is the global batch's.
TEST(DataParallel, TwoRanksTrainTheDFlashDraftOfOneRank) {
  TrainFixture f;
  const auto recipe = dflash_recipe({"training.steps=16", "training.dist_timeout_s=20"});
  run_training(f.config(f.dir.file("one"), recipe));
  auto r = test::run_command(f.command(f.dir.file("two"), recipe) + " --nproc-per-node 2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LE(max_abs_diff(f.dir.file("one") + "/export", f.dir.file("two") + "/export"), 1e-4);
}

// Two ranks under torchrun's environment; `victim` is killed with -9 once a checkpoint exists.
// Returns the survivor's log and exit status line, and how long the survivor took to stop.
struct KillRun {
  std::string survivor_log, status;
  double seconds = 0;
  int checkpoint_step = 0;
};

KillRun kill_one_rank(const TrainFixture& f, const std::string& out, int victim, int port) {
  const std::string cmd = f.command(out, {"training.steps=60", "training.save_every=4", "training.dist_timeout_s=20"});
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 ";
  const int survivor = 1 - victim;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_command("(" + env + "RANK=0 " + cmd + " > " + out + ".r0.log 2>&1 & p0=$!; " + env + "RANK=1 " +
                             cmd + " > " + out + ".r1.log 2>&1 & p1=$!; for i in $(seq 1 3000); do [ -f " + out +
                             "/checkpoint/state.json ] && break; kill -0 $p0 $p1 2>/dev/null || break; sleep 0.02; done; kill -9 $p" + std::to_string(victim) +
                             "; wait $p" + std::to_string(victim) + "; wait $p" + std::to_string(survivor) +
                             "; echo survivor=$?)");
  KillRun k;
  k.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  k.status = r.output;
  k.survivor_log = read_text_file(out + ".r" + std::to_string(survivor) + ".log");
  k.checkpoint_step = nlohmann::json::parse(read_text_file(out + "/checkpoint/state.json"))["step"].get<int>();
  return k;
}

TEST(DataParallel, KilledRankStopsTheOtherNamingItAndTheRunResumes) {
  TrainFixture f;
  for (int victim : {1, 0}) {
    SCOPED_TRACE("killing rank " + std::to_string(victim));
    const std::string out = f.dir.file("run" + std::to_string(victim));
    const KillRun k = kill_one_rank(f, out, victim, free_local_port());
    ASSERT_NE(k.status.find("survivor="), std::string::npos) << k.status;
    EXPECT_EQ(k.status.find("survivor=0"), std::string::npos) << "the survivor must fail\n" << k.survivor_log;
    EXPECT_NE(k.survivor_log.find("lost rank " + std::to_string(victim)), std::string::npos) << k.survivor_log;
    EXPECT_LT(k.seconds, 60);
    EXPECT_LT(k.checkpoint_step, 60) << "the run finished before the kill; the test proves nothing";
    // Rerunning (two local ranks) resumes from the checkpoint and finishes.
    auto r = test::run_command(f.command(out, {"training.steps=60", "training.save_every=4"}) +
                               " --nproc-per-node 2 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
    EXPECT_TRUE(std::filesystem::exists(out + "/export/model.safetensors"));
  }
}

// A listening socket on 127.0.0.1:port (port 0: any); -1 when the port is taken.
int listen_on(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(DataParallel, RendezvousPortsAreFreeWhenChosen) {
  // The rendezvous tests once derived their port from the process id (31000 + pid % 2000) and
  // failed when another process held it ("Address already in use"). Hold that port, then ask.
  const int held = listen_on(31000 + int(::getpid() % 2000));
  for (int i = 0; i < 20; ++i) {
    const int port = free_local_port();
    const int fd = listen_on(port);
    EXPECT_GE(fd, 0) << "port " << port << " was handed out but cannot be bound";
    if (fd >= 0) close(fd);
  }
  if (held >= 0) close(held);
}

TEST(DataParallel, AFrozenRankIsNamedAfterTheCollectiveTimeout) {
  // SIGSTOP freezes rank 1 (heartbeat included): rank 0's next collective times out after
  // dist_timeout_s and names it.
  TrainFixture f;
  const std::string out = f.dir.file("run");
  const std::string cmd = f.command(out, {"training.steps=400", "training.save_every=4", "training.dist_timeout_s=4"});
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_local_port()) +
                          " WORLD_SIZE=2 ";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_command("(" + env + "RANK=0 " + cmd + " > " + out + ".r0.log 2>&1 & p0=$!; " + env + "RANK=1 " +
                             cmd + " > /dev/null 2>&1 & p1=$!; for i in $(seq 1 3000); do [ -f " + out +
                             "/checkpoint/state.json ] && break; kill -0 $p0 $p1 2>/dev/null || break; sleep 0.02; done; kill -STOP $p1; wait $p0; "
                             "echo rank0=$?; kill -9 $p1)");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log0 = read_text_file(out + ".r0.log");
  EXPECT_EQ(r.output.find("rank0=0"), std::string::npos) << log0;
  EXPECT_NE(log0.find("lost rank 1"), std::string::npos) << log0;
  EXPECT_LT(seconds, 30);
}

TEST(DataParallel, TwoRankCheckpointResumesOnOneRank) {
  TrainFixture f;
  run_training(f.config(f.dir.file("one")));  // 12 steps, one rank
  const std::string out = f.dir.file("mixed");
  auto r = test::run_command(f.command(out) + " --nproc-per-node 2 --stop-after-steps 5 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto state = nlohmann::json::parse(read_text_file(out + "/checkpoint/state.json"));
  EXPECT_EQ(state["world_size"].get<int>(), 2);
  ASSERT_EQ(state["step"].get<int>(), 5);
  EXPECT_FALSE(std::filesystem::exists(out + "/export"));
  auto s = run_training(f.config(out));  // the rest on one rank, the same global batch
  EXPECT_EQ(s.steps_done, 12);
  EXPECT_LE(max_abs_diff(f.dir.file("one") + "/export", out + "/export"), 1e-4);
}

TEST(DataParallel, Zero1OwnersBalanceWholeTensors) {
  std::vector<torch::Tensor> p{torch::zeros({100}), torch::zeros({10}), torch::zeros({60}), torch::zeros({50}),
                               torch::zeros({5})};
  const auto o = zero1_owners(p, 2);
  ASSERT_EQ(o.size(), p.size());
  int64_t load[2] = {0, 0};
  for (size_t i = 0; i < p.size(); ++i) load[o[i]] += p[i].numel();
  EXPECT_EQ(load[0] + load[1], 225);
  EXPECT_LE(std::abs(load[0] - load[1]), 15);  // 100+10 | 60+50+5
  EXPECT_EQ(zero1_owners(p, 1), std::vector<int>(5, 0));
}

TEST(DataParallel, BadEnvironmentNamesTheVariable) {
  ::setenv("WORLD_SIZE", "two", 1);
  try {
    DistEnv::from_environment();
    ADD_FAILURE() << "accepted WORLD_SIZE=two";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WORLD_SIZE='two'"), std::string::npos) << e.what();
  }
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "2", 1);
  EXPECT_THROW(DistEnv::from_environment(), Error);
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  EXPECT_EQ(DistEnv::from_environment().world, 1);
}

}  // namespace
}  // namespace eaglet
