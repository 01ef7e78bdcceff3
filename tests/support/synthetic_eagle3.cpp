#include "support/synthetic_eagle3.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <algorithm>
#include <random>

#include "io/safetensors.h"
#include "models/eagle3.h"
#include "support/test_util.h"

namespace eaglet::test {

void write_draft(const std::string& dir, const DraftSpec& s) {
  std::filesystem::create_directories(dir);
  nlohmann::json layer = {{"hidden_size", s.hidden},         {"intermediate_size", s.intermediate},
                          {"num_attention_heads", s.heads},  {"num_key_value_heads", s.kv_heads},
                          {"head_dim", s.head_dim},          {"vocab_size", s.vocab},
                          {"rms_norm_eps", 1e-5},
                          {"max_position_embeddings", 2048}, {"hidden_act", "silu"},
                          {"num_hidden_layers", s.layers}};
  if (s.rope_parameters) layer["rope_parameters"] = {{"rope_theta", s.rope_theta}, {"rope_type", "default"}};
  else layer["rope_theta"] = s.rope_theta;
  if (s.attention_bias) layer["attention_bias"] = true;
  nlohmann::json cfg;
  if (s.speculators_config) {
    if (s.qwen3_layer) layer["model_type"] = "qwen3";
    cfg = {{"architectures", {"Eagle3Speculator"}},
           {"speculators_model_type", "eagle3"},
           {"transformer_layer_config", layer},
           {"speculators_config", {{"algorithm", "eagle3"}, {"proposal_methods", nlohmann::json::array()}}}};
  } else {
    cfg = layer;
    cfg["architectures"] = {s.qwen3_layer ? "Eagle3Qwen3ForCausalLM" : "LlamaForCausalLMEagle3"};
    cfg["model_type"] = s.qwen3_layer ? "qwen3" : "llama";
  }
  cfg["draft_vocab_size"] = s.draft_vocab;
  cfg["target_hidden_size"] = s.target_hidden;
  cfg["norm_before_residual"] = s.norm_before_residual;
  nlohmann::json& flags = s.flags_in_eagle_config ? cfg["eagle_config"] : cfg;
  if (s.norm_before_fc) flags["norm_before_fc"] = true;
  if (s.fc_norm) flags["fc_norm"] = true;
  if (s.norm_output) flags["norm_output"] = true;
  if (!s.aux_ids.empty()) {
    if (s.aux_in_eagle_config) {
      cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = s.aux_ids;
      cfg["eagle_config"]["use_aux_hidden_state"] = true;
    }
    else cfg["eagle_aux_hidden_state_layer_ids"] = s.aux_ids;
  }
  write_text(dir + "/config.json", cfg.dump(2));

  RandomTensors rt(s.dtype, s.seed);
  auto& ts = rt.tensors();
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float stddev, float mean = 0.0f) {
    rt.add(name, std::move(shape), stddev, mean);
  };
  const int64_t H = s.hidden, Ht = s.target_hidden, qd = int64_t(s.heads) * s.head_dim, kvd = int64_t(s.kv_heads) * s.head_dim;
  add("fc.weight", {H, 3 * Ht}, s.scale);
  for (int i = 0; i < s.layers; ++i) {
    // Layer 0 as the checkpoint's key style names it; later layers as vLLM names them.
    const std::string P = i > 0 ? "layers." + std::to_string(i) + "." : s.vllm_keys ? "layers.0." : "midlayer.";
    const int64_t in = i == 0 ? 2 * H : H;  // layer 0 reads [embedding, hidden]
    add(P + "input_layernorm.weight", {H}, 0.1f, 1.0f);
    if (i == 0 || s.hidden_norm_in_every_layer) add(P + "hidden_norm.weight", {H}, 0.1f, 1.0f);
    add(P + "post_attention_layernorm.weight", {H}, 0.1f, 1.0f);
    add(P + "self_attn.q_proj.weight", {qd, in}, s.scale);
    add(P + "self_attn.k_proj.weight", {kvd, in}, s.scale);
    add(P + "self_attn.v_proj.weight", {kvd, in}, s.scale);
    add(P + "self_attn.o_proj.weight", {H, qd}, s.scale);
    add(P + "mlp.gate_proj.weight", {s.intermediate, H}, s.scale);
    add(P + "mlp.up_proj.weight", {s.intermediate, H}, s.scale);
    add(P + "mlp.down_proj.weight", {H, s.intermediate}, s.scale);
    if (s.qwen3_layer) {
      add(P + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, 1.0f);
      add(P + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, 1.0f);
    }
    if (s.attention_bias) {
      add(P + "self_attn.q_proj.bias", {qd}, 0.2f);
      add(P + "self_attn.k_proj.bias", {kvd}, 0.2f);
      add(P + "self_attn.v_proj.bias", {kvd}, 0.2f);
      if (!s.qwen3_layer) add(P + "self_attn.o_proj.bias", {H}, 0.2f);
    }
  }
  add("norm.weight", {H}, 0.1f, 1.0f);
  if (s.own_lm_head) add("lm_head.weight", {s.draft_vocab, H}, 0.3f);
  if (s.own_embed) add("embed_tokens.weight", {s.vocab, H}, 1.0f);
  if (s.norm_before_fc) add("input_norm.weight", {3 * Ht}, 0.1f, 1.0f);
  if (s.fc_norm)
    for (int i = 0; i < 3; ++i) add("fc_norm." + std::to_string(i) + ".weight", {Ht}, 0.1f, 1.0f);
  if (s.draft_vocab < s.vocab && s.write_d2t) {
    // A deterministic subset of target ids, ascending: every third id, then fill from the start.
    std::vector<int64_t> used;
    for (int v = 0; v < s.vocab && int(used.size()) < s.draft_vocab; v += 3) used.push_back(v);
    for (int v = 1; int(used.size()) < s.draft_vocab; v += 3) used.push_back(v);
    std::sort(used.begin(), used.end());
    std::vector<int64_t> d2t(used.size());
    std::string t2d(size_t(s.vocab), '\0');
    for (size_t i = 0; i < used.size(); ++i) {
      d2t[i] = used[i] - int64_t(i);
      t2d[size_t(used[i])] = 1;
    }
    ts.push_back({"d2t", DType::I64, {s.draft_vocab}, std::string(reinterpret_cast<const char*>(d2t.data()), d2t.size() * 8)});
    ts.push_back({"t2d", DType::BOOL, {s.vocab}, t2d});
  }
  write_safetensors(dir + "/model.safetensors", ts);
}

void write_steered_byte_target(const std::string& dir) {
  write_byte_vocab_target(dir);
  const int live[] = {0, 3, 6};
  std::vector<TensorToWrite> all;
  {
    const Checkpoint ck = Checkpoint::open_dir(dir);
    for (const std::string& n : ck.names()) {
      const TensorInfo& t = ck.get(n);
      std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
      if (n == "lm_head.weight") {
        auto* w = reinterpret_cast<float*>(bytes.data());
        const int64_t rows = t.shape[0], cols = t.shape[1];
        for (int64_t r = 0; r < rows; ++r) {
          const bool keep = std::find(std::begin(live), std::end(live), int(r)) != std::end(live);
          for (int64_t c = 0; c < cols; ++c) w[r * cols + c] = keep ? 4.0f * w[r * cols + c] : 0.0f;
        }
      }
      all.push_back({n, t.dtype, t.shape, std::move(bytes)});
    }
  }
  write_safetensors(dir + "/model.safetensors", all);
}

std::vector<float> fixed_prompt_logits(const Eagle3Draft& d) {
  const int T = 5, H = d.config().hidden;
  const auto aux = random_normal(size_t(T * 3 * d.config().target_hidden), 1.0f, 11);
  std::vector<float> g(size_t(T * H)), next(size_t(T * H)), out;
  d.fuse_aux(pool(), aux.data(), T, g.data());
  KvCache cache(d.kv_shape(4, 16));
  d.forward(pool(), cache, {Eagle3Rows{cache.create(), {5, 9, 2, 7, 30}}}, g.data(), next.data(), &out, true);
  return out;
}

}  // namespace eaglet::test
