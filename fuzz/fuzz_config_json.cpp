// config.json as every architecture reads it: the shared decoder fields, RoPE and its scaling,
// MiniMax-M2/M3 (MoE, sparse attention, quantization) and EAGLE-3 draft configs.
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "io/json_config.h"
#include "models/eagle3.h"
#include "models/minimax/minimax_config.h"
#include "models/model.h"
#include "models/rope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 0;
  const eaglet::JsonConfig cfg(j, "config.json");
  using eaglet::fuzz::expect_only_errors;
  expect_only_errors([&] {
    const eaglet::ModelConfig c = eaglet::parse_model_config(cfg, "dir");
    eaglet::Rope::from_config(cfg, c.head_dim);
  });
  expect_only_errors([&] { eaglet::parse_minimax_m2_config(cfg, "dir"); });
  expect_only_errors([&] { eaglet::parse_minimax_m3_config(cfg, cfg, "dir"); });
  expect_only_errors([&] { eaglet::parse_eagle3_config(cfg, 32, {.numbering = eaglet::AuxNumbering::Input}); });
  return 0;
}
