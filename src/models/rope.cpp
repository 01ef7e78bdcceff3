#include "models/rope.h"

#include <cmath>

#include "core/error.h"

namespace eaglet {

Rope Rope::from_config(const JsonConfig& cfg, int head_dim) {
  Rope r;
  r.rot_dim = head_dim;
  // transformers v5 moves rope_theta, the scaling fields and partial_rotary_factor into one
  // rope_parameters object; older configs keep rope_theta and rope_scaling at the top level.
  const bool v5 = cfg.has("rope_parameters");
  const JsonConfig params = v5 ? cfg.sub("rope_parameters") : cfg;
  const JsonConfig& rotary = cfg.has("partial_rotary_factor") || !v5 ? cfg : params;
  if (cfg.has("rotary_dim")) {
    const int64_t d = cfg.get_int("rotary_dim");
    EAGLET_CHECK(d > 0 && d <= head_dim && d % 2 == 0, "{}: rotary_dim {} must be even and in [2, head_dim {}]",
                 cfg.where(), d, head_dim);
    r.rot_dim = int(d);
  } else if (rotary.has("partial_rotary_factor")) {
    const double f = rotary.get_double("partial_rotary_factor");
    EAGLET_CHECK(f > 0 && f <= 1, "{}: partial_rotary_factor must be in (0, 1] (got {})", rotary.where(), f);
    r.rot_dim = int(head_dim * f);
  }
  EAGLET_CHECK(r.rot_dim > 0 && r.rot_dim <= head_dim && r.rot_dim % 2 == 0,
               "{}: rotary dimension {} does not fit head_dim {}", cfg.where(), r.rot_dim, head_dim);
  // theta <= 0 gives NaN or constant angles: every position would look the same.
  if (v5 && cfg.has("rope_theta") && params.has("rope_theta") && cfg.get_double("rope_theta") != params.get_double("rope_theta"))
    fail("{}: rope_theta {} and rope_parameters.rope_theta {} disagree", cfg.where(), cfg.get_double("rope_theta"),
         params.get_double("rope_theta"));
  const double theta_d = cfg.has("rope_theta") ? cfg.get_double("rope_theta") : params.get_double("rope_theta", 10000.0);
  EAGLET_CHECK(theta_d > 1 && std::isfinite(theta_d), "{}: rope_theta must be a finite number above 1 (got {})",
               cfg.where(), theta_d);
  r.theta = theta_d;
  const float theta = float(theta_d);
  const int half = r.rot_dim / 2;
  r.inv_freq.resize(size_t(half));
  for (int i = 0; i < half; ++i)
    r.inv_freq[size_t(i)] = 1.0f / std::pow(theta, float(2 * i) / float(r.rot_dim));
  if (!cfg.has("rope_scaling") && !v5) return r;
  const JsonConfig sc = cfg.has("rope_scaling") ? cfg.sub("rope_scaling") : params;
  std::string type = sc.get_string("rope_type", sc.get_string("type", "default"));
  if (type == "default") return r;
  r.scaling = type;
  r.scaling_config = sc.raw();
  for (const char* k : {"rope_theta", "partial_rotary_factor"}) r.scaling_config.erase(k);  // v5 keeps them here
  if (type != "linear" && type != "llama3")
    fail("{}: unsupported rope_scaling type '{}' (supported: default, linear, llama3)", sc.where(), type);
  const double factor = sc.get_double("factor");
  EAGLET_CHECK(factor > 0 && std::isfinite(factor), "{}: factor must be a positive number (got {})", sc.where(), factor);
  if (type == "linear") {
    r.position_scale = 1.0f / float(factor);
    return r;
  }
  if (type == "llama3") {
    const double low = sc.get_double("low_freq_factor", 1.0);
    const double high = sc.get_double("high_freq_factor", 4.0);
    const double old_ctx = sc.get_double("original_max_position_embeddings", 8192);
    // The smooth interpolation divides by (high - low) and by old_ctx.
    EAGLET_CHECK(low > 0 && high > low, "{}: need 0 < low_freq_factor < high_freq_factor (got {} and {})", sc.where(),
                 low, high);
    EAGLET_CHECK(old_ctx > 0, "{}: original_max_position_embeddings must be positive (got {})", sc.where(), old_ctx);
    const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    for (auto& f : r.inv_freq) {
      const double wavelen = 2 * M_PI / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f = float(f / factor);
      } else {
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        f = float((1 - smooth) * f / factor + smooth * f);
      }
    }
  }
  return r;
}

void Rope::angles(int64_t pos, float* cos, float* sin) const {
  const float p = float(pos) * position_scale;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float a = p * inv_freq[i];
    cos[i] = std::cos(a);
    sin[i] = std::sin(a);
  }
}

}  // namespace eaglet
