#include "support/synthetic_dflash.h"

#include <filesystem>

#include "io/safetensors.h"
#include "support/test_util.h"

namespace eaglet::test {

nlohmann::json dflash_draft_config(int mask_token_id, int target_layers) {
  return {{"architectures", {"DFlashDraftModel"}}, {"model_type", "qwen3"}, {"hidden_size", 48},
          {"intermediate_size", 64}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
          {"num_hidden_layers", 2}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"block_size", 8},
          {"num_target_layers", target_layers}, {"layer_types", {"full_attention", "full_attention"}},
          {"dflash_config", {{"mask_token_id", mask_token_id}, {"target_layer_ids", {0, 2}}}}};
}

std::vector<nlohmann::json> dflash_attention_variants(int mask_token_id, int target_layers) {
  const nlohmann::json base = dflash_draft_config(mask_token_id, target_layers);
  std::vector<nlohmann::json> out{base};
  nlohmann::json j = base;
  j["layer_types"] = {"sliding_attention", "full_attention"};
  j["sliding_window"] = 4;
  out.push_back(j);
  j = base;
  j["dflash_config"]["use_swa"] = true;
  j["dflash_config"]["swa_window_size"] = 3;
  j["dflash_config"]["causal"] = false;
  out.push_back(j);
  j = base;
  j["is_causal"] = true;
  out.push_back(j);
  return out;
}

void write_dflash_draft(const std::string& dir, const nlohmann::json& cfg, const std::vector<std::string>& extra_tensors,
                        uint64_t seed) {
  std::filesystem::create_directories(dir);
  write_text(dir + "/config.json", cfg.dump());
  std::vector<TensorToWrite> ts;
  auto put = [&](const std::string& name, std::vector<int64_t> shape, float stddev, float mean = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto v = random_normal(size_t(n), stddev, seed++);
    for (float& x : v) x += mean;
    ts.push_back({name, DType::F32, shape, float_bytes(v, DType::F32)});
  };
  put("fc.weight", {48, 96}, 0.15f);
  put("hidden_norm.weight", {48}, 0.1f, 1.0f);
  put("norm.weight", {48}, 0.1f, 1.0f);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    put(p + "input_layernorm.weight", {48}, 0.1f, 1.0f);
    put(p + "post_attention_layernorm.weight", {48}, 0.1f, 1.0f);
    put(p + "self_attn.q_proj.weight", {64, 48}, 0.15f);
    put(p + "self_attn.k_proj.weight", {32, 48}, 0.15f);
    put(p + "self_attn.v_proj.weight", {32, 48}, 0.15f);
    put(p + "self_attn.o_proj.weight", {48, 64}, 0.15f);
    put(p + "self_attn.q_norm.weight", {16}, 0.1f, 1.0f);
    put(p + "self_attn.k_norm.weight", {16}, 0.1f, 1.0f);
    put(p + "mlp.gate_proj.weight", {64, 48}, 0.15f);
    put(p + "mlp.up_proj.weight", {64, 48}, 0.15f);
    put(p + "mlp.down_proj.weight", {48, 64}, 0.15f);
  }
  for (const std::string& name : extra_tensors) put(name, {4}, 1.0f);
  write_safetensors(dir + "/model.safetensors", ts);
}

}  // namespace eaglet::test
