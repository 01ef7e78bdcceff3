// Rotary position embedding frequencies, including the `rope_scaling` variants real checkpoints
// use. Computed in F32 the way Hugging Face does, so logits match its reference.
#pragma once
#include <string>
#include <vector>

#include "io/json_config.h"

namespace eaglet {

struct Rope {
  int rot_dim = 0;               // rotated dims per head (partial rotary when < head_dim)
  std::vector<float> inv_freq;   // [rot_dim / 2]
  float position_scale = 1.0f;   // "linear" scaling divides positions
  double theta = 10000.0;        // as configured (drafts trained for this target inherit it)
  std::string scaling = "default";  // rope_scaling type
  nlohmann::json scaling_config;    // the rope_scaling object as read (null for default), for drafts to inherit

  // Reads rope_theta, rope_scaling and partial_rotary_factor/rotary_dim from a model config.
  static Rope from_config(const JsonConfig& cfg, int head_dim);
  // cos/sin for one position: [rot_dim / 2] each.
  void angles(int64_t pos, float* cos, float* sin) const;
};

}  // namespace eaglet
