// The EAGLE-3 checkpoint schema (models/eagle3_schema.h) and the decoder layer's tensor names
// (models/layer_weights.h): the names llama.cpp's converter writes, the layer-0 prefixes real
// checkpoints use, and shapes that follow the config.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "models/eagle3_config.h"
#include "models/eagle3_schema.h"

namespace eaglet {
namespace {

TEST(Eagle3Schema, GgufNamesAreLlamaCppsAndDistinct) {
  // As llama.cpp's convert_hf_to_gguf.py names an eagle3 draft's tensors.
  EXPECT_EQ(eagle3::gguf_name("midlayer.self_attn.q_proj.weight", "midlayer."), "blk.0.attn_q.weight");
  EXPECT_EQ(eagle3::gguf_name("blk.0.hidden_norm.weight", "blk.0."), "blk.0.attn_norm_2.weight");
  EXPECT_EQ(eagle3::gguf_name("blk.0.input_layernorm.weight", "blk.0."), "blk.0.attn_norm.weight");
  EXPECT_EQ(eagle3::gguf_name("norm.weight", "blk.0."), "output_norm.weight");
  EXPECT_EQ(eagle3::gguf_name("lm_head.weight", "blk.0."), "output.weight");
  EXPECT_EQ(eagle3::gguf_name("input_norm.weight", "blk.0."), "enc.output_norm.weight");
  EXPECT_EQ(eagle3::gguf_name("fc_norm.1.weight", "blk.0."), "fc_norm.1.weight");  // llama.cpp has none
  std::set<std::string> gguf;
  size_t n = 0;
  for (const LayerTensorSpec& t : layer_tensors()) {
    EXPECT_EQ(size_t(t.id), n++) << t.hf;  // the table follows the enum
    gguf.insert(eagle3::gguf_name(std::string("blk.0.") + t.hf, "blk.0."));
  }
  for (int t = 0; t <= int(eagle3::Tensor::HiddenNorm); ++t) {
    const eagle3::TensorSpec& s = eagle3::spec(eagle3::Tensor(t));
    EXPECT_EQ(int(s.id), t) << s.hf;
    const std::string hf = s.id == eagle3::Tensor::HiddenNorm ? std::string("blk.0.") + s.hf : s.hf;
    gguf.insert(eagle3::gguf_name(hf, "blk.0."));
  }
  EXPECT_EQ(gguf.size(), layer_tensors().size() + size_t(eagle3::Tensor::HiddenNorm) + 1) << "two tensors share a GGUF name";
}

Eagle3Config small_config() {
  Eagle3Config c;
  c.hidden = 64;
  c.target_hidden = 96;
  c.intermediate = 160;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab = 500;
  c.draft_vocab = 120;
  return c;
}

TEST(Eagle3Schema, LayerPrefixesAndShapesFollowTheConfig) {
  const std::set<std::string> vllm = {"layers.0.self_attn.q_proj.weight"};
  EXPECT_EQ(eagle3::first_layer_prefix([&](const std::string& n) { return vllm.count(n) > 0; }), "layers.0.");
  EXPECT_EQ(eagle3::first_layer_prefix([](const std::string& n) { return n == "midlayer.self_attn.q_proj.weight"; }),
            "midlayer.");
  EXPECT_EQ(eagle3::first_layer_prefix([](const std::string&) { return false; }), "");
  EXPECT_EQ(eagle3::layer_prefix(2, eagle3::kMidlayer), "layers.2.");

  Eagle3Config c = small_config();
  const eagle3::Dims d = eagle3::dims(c);
  EXPECT_EQ(eagle3::shape(eagle3::Tensor::Fc, d), (std::vector<int64_t>{64, 288}));
  EXPECT_EQ(eagle3::shape(eagle3::Tensor::LmHead, d), (std::vector<int64_t>{120, 64}));
  EXPECT_EQ(eagle3::shape(eagle3::Tensor::D2t, d), (std::vector<int64_t>{120}));
  EXPECT_EQ(layer_tensor_shape(LayerTensor::Q, d.layer), (std::vector<int64_t>{64, 128}));  // [embedding, hidden] in
  EXPECT_EQ(layer_tensor_shape(LayerTensor::K, d.layer), (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(layer_tensor_shape(LayerTensor::Down, d.layer), (std::vector<int64_t>{64, 160}));
}

// The settings the trainer keeps are the ones it exports: the config.json written from an
// Eagle3Config reads back to the same config (and RoPE), plain and with EAGLE-3.1's flags.
TEST(Eagle3Schema, ExportedConfigReadsBackToTheSameSettings) {
  Eagle3Config c = small_config();
  c.rms_eps = 1e-5f;
  c.aux_layers = {2, 8, 13};
  const nlohmann::json scaling = {{"type", "linear"}, {"factor", 2.0}};
  const Rope rope = Rope::from_config(JsonConfig({{"rope_theta", 500000.0}, {"rope_scaling", scaling}}, "rope"), 16);
  for (bool eagle31 : {false, true}) {
    c.fc_norm = c.norm_output = eagle31;
    const nlohmann::json j = eagle3_config_json(c, rope, 4096);
    const JsonConfig back(j, "exported config.json");
    const Eagle3Config r = parse_eagle3_config(back, 16);
    EXPECT_EQ(r.hidden, c.hidden);
    EXPECT_EQ(r.target_hidden, c.target_hidden);
    EXPECT_EQ(r.intermediate, c.intermediate);
    EXPECT_EQ(r.num_heads, c.num_heads);
    EXPECT_EQ(r.num_kv_heads, c.num_kv_heads);
    EXPECT_EQ(r.head_dim, c.head_dim);
    EXPECT_EQ(r.vocab, c.vocab);
    EXPECT_EQ(r.draft_vocab, c.draft_vocab);
    EXPECT_EQ(r.rms_eps, c.rms_eps);
    EXPECT_EQ(r.aux_layers, c.aux_layers);
    EXPECT_EQ(r.fc_norm, eagle31);
    EXPECT_EQ(r.norm_output, eagle31);
    EXPECT_FALSE(r.norm_before_residual);
    EXPECT_EQ(j.contains("fc_norm"), eagle31);  // a plain draft's config stays the plain layout
    const Rope rr = Rope::from_config(eagle3_layer_config(back), r.head_dim);
    EXPECT_EQ(rr.theta, rope.theta);
    EXPECT_EQ(rr.inv_freq, rope.inv_freq);
    EXPECT_EQ(rr.position_scale, rope.position_scale);
    EXPECT_EQ(j["max_position_embeddings"], 4096);
  }
  c.layer = Eagle3Layer::Qwen3;
  EXPECT_THROW(eagle3_config_json(c, rope, 4096), Error);
}

}  // namespace
}  // namespace eaglet
