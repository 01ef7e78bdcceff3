// `eaglet train`: online EAGLE-3 training. The target's hidden states stream from inference
// workers (threads or ZeroMQ processes) while the trainer runs TTT on them; checkpoints allow an
// exact resume; the result is exported as a Hugging Face draft. No libtorch in this header.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "models/model.h"
#include "train/draft_options.h"
#include "train/hidden_stream.h"
#include "train/train_config.h"

namespace eaglet {

struct TrainSummary {
  int64_t steps_done = 0;
  double wall_seconds = 0, train_seconds = 0;
  double trainer_busy_fraction = 0;  // time not spent waiting for hidden states
  StreamStats stream;
  std::vector<double> eval_accuracy;     // per TTT step, on the held-out split
  // EAGLE-3: 1 + sum_k prod_{i<=k} acc_i over k = 1..min(3, ttt); DFlash: counted over held-out blocks.
  double eval_simulated_acceptance = 0;
  std::string acceptance_label;  // which of the two, for the log
  std::string export_dir;
};

struct TrainHooks {
  int stop_after_steps = 0;              // > 0: stop (with a checkpoint) after this many steps of this run
  std::atomic<bool>* stop_flag = nullptr;  // set by SIGINT/SIGTERM: checkpoint and stop
};

TrainSummary run_training(const TrainConfig& cfg, const TrainHooks& hooks = {});

// Runs the libtorch draft module on an exported draft directory: one step over `tokens` with
// g = fuse(aux) (aux [T, 3H]): logits [T, Vd] and the state it feeds back [T, H]. Lets tests hold
// the training and the inference implementations to the same numbers.
struct TorchDraftStep {
  std::vector<float> logits, next;
};
TorchDraftStep torch_draft_step(const std::string& export_dir, const Model& target, const std::vector<int>& tokens,
                                const std::vector<float>& aux);

// The draft module's shape and RoPE for a recipe and target: the target's width, heads, RoPE base
// and scaling unless the recipe overrides them.
DraftModuleOptions draft_module_options(const TrainConfig& c, const ModelConfig& t);

}  // namespace eaglet
