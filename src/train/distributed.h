// Data parallelism for the trainer over torch.distributed's c10d: a TCPStore rendezvous and
// ProcessGroupGloo (the engine Debian's libtorch ships; no home-made collectives). Ranks find
// each other through torchrun's environment; gradients are summed in buckets launched from
// autograd hooks while backward still runs; a rank that dies or hangs makes every other rank
// stop with an error naming it. The c10d headers stay inside distributed.cpp.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace eaglet {

// torchrun's variables: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. Unset means one
// rank; malformed values are errors naming the variable.
struct DistEnv {
  int rank = 0, world = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  static DistEnv from_environment();
};

class ProcessGroup {
 public:
  // Rendezvous (rank 0 hosts the TCPStore); collectives time out after `timeout`.
  ProcessGroup(const DistEnv& env, std::chrono::seconds timeout);
  ~ProcessGroup();
  int rank() const;
  int world() const;
  void all_reduce_sum(torch::Tensor& t);  // in place, float or double
  void broadcast(torch::Tensor& t, int root);
  // Rank 0 publishes, the others wait (up to `timeout`): for work only rank 0 does (regeneration).
  void publish(const std::string& key);
  void wait_for(const std::string& key, std::chrono::seconds timeout);
  // Marks this rank as at `step` (read when a collective fails, to name the ranks that lag).
  void at_step(int64_t step);
  // A collective failed: which rank is lost and why, as one message.
  std::string diagnose(const std::string& what) const;

  struct Impl;

 private:
  friend class GradientSync;
  std::unique_ptr<Impl> impl_;
};

// Sums the gradients of `params` over the ranks: hooks copy each gradient into its bucket as
// autograd produces it and start the bucket's all-reduce once the bucket is full, so
// communication overlaps the rest of backward. finish() waits and writes the sums back.
class GradientSync {
 public:
  GradientSync(ProcessGroup& pg, const std::vector<torch::Tensor>& params, int64_t bucket_bytes = 4 << 20);
  ~GradientSync();
  void finish();
  int num_buckets() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ZeRO-1: which rank keeps the optimiser state of each parameter (whole tensors, largest first to
// the least loaded rank, so every rank computes the same assignment).
std::vector<int> zero1_owners(const std::vector<torch::Tensor>& params, int world);

}  // namespace eaglet
