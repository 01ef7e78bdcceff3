// The EAGLE-3 draft module's shape and RoPE (no libtorch here: the CLI and trainer.h include it).
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

namespace eaglet {

struct DraftModuleOptions {
  int hidden = 0, target_hidden = 0, intermediate = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int vocab = 0, draft_vocab = 0;
  double rms_eps = 1e-6, rope_theta = 10000.0;
  // The target's RoPE scaling, inherited: frequencies [head_dim / 2] and the "linear" position
  // factor, as models/rope computes them. Empty: plain RoPE at rope_theta.
  std::vector<float> rope_inv_freq;
  float rope_position_scale = 1.0f;
  nlohmann::json rope_scaling;  // the rope_scaling object behind them (exported with the draft)
};

}  // namespace eaglet
