// Llama-family models from llama.cpp's GGUF files (`llama`, `qwen2`, `qwen3`). The metadata is
// turned into the Hugging Face config fields, so config checks, RoPE and the decoder are the
// safetensors path's own; tensors become weight views as models/gguf_weights.h describes.
//
// llama.cpp's converter permutes the q and k rows of `llama` models for its interleaved RoPE;
// they are put back in Hugging Face order at load. qwen2 and qwen3 use the NeoX layout in both
// and are left as they are.
#include <spdlog/spdlog.h>

#include <cstring>

#include "core/error.h"
#include "io/gguf.h"
#include "kernels/ggml_quant.h"
#include "models/decoder.h"
#include "models/gguf_weights.h"
#include "models/layer_weights.h"

namespace eaglet {

namespace {

struct GgufArch {
  const char* gguf;
  const char* hf;
  bool qkv_bias, qk_norm, permuted_qk;
};
constexpr GgufArch kArchs[] = {
    {"llama", "LlamaForCausalLM", false, false, true},
    {"qwen2", "Qwen2ForCausalLM", true, false, false},
    {"qwen3", "Qwen3ForCausalLM", false, true, false},
};

// The Hugging Face config.json fields of a GGUF model's metadata.
nlohmann::json hf_config(const GgufFile& f, const GgufArch& a) {
  nlohmann::json hf = gguf_llama_config(f, a.gguf);
  hf["architectures"] = {a.hf};
  hf["vocab_size"] = f.get("token_embd.weight").dims.size() == 2 ? f.get("token_embd.weight").dims[1] : 0;
  hf["tie_word_embeddings"] = !f.find("output.weight");
  const nlohmann::json& m = f.metadata();
  for (const char* k : {"bos_token_id", "eos_token_id"})
    if (m.contains(std::string("tokenizer.ggml.") + k)) hf[k] = m[std::string("tokenizer.ggml.") + k];
  return hf;
}

// What the file calls its mix (llama.cpp's llama_ftype, `general.file_type`: Q4_K_M is Q4_K with
// some Q6_K), else the type of one layer matrix.
std::string file_type_name(const GgufFile& f) {
  static const std::pair<int, const char*> kNames[] = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {32, "BF16"}};
  const nlohmann::json& m = f.metadata();
  if (auto it = m.find("general.file_type"); it != m.end() && it->is_number_integer())
    for (auto [id, name] : kNames)
      if (*it == id) return name;
  return kernels::ggml_type_info(f.get("blk.0.ffn_down.weight").type)->name;
}

}  // namespace

std::unique_ptr<Model> load_gguf_model(const std::string& path) {
  auto file = std::make_shared<const GgufFile>(path);
  const std::string arch = file->metadata().value("general.architecture", "");
  const GgufArch* a = nullptr;
  for (const GgufArch& x : kArchs)
    if (arch == x.gguf) a = &x;
  if (!a) fail("{}: GGUF architecture '{}' is not supported (llama, qwen2, qwen3)", path, arch);
  const JsonConfig cfg(hf_config(*file, *a), path + " (GGUF metadata)");
  ModelConfig mc = DecoderModel::parse_config(cfg, path);
  mc.architecture = a->hf;
  const DecoderOptions opts{a->qkv_bias, a->qk_norm, !file->find("output.weight")};

  WeightStore store;
  GgufWeights w(file, &store);
  const int64_t H = mc.hidden, hd = mc.head_dim;
  const int64_t qd = mc.num_heads * hd, kvd = mc.num_kv_heads * hd;
  const kernels::WeightView embed = w.matrix("token_embd.weight", mc.vocab, H, 0, /*floats=*/true);
  const kernels::WeightView lm_head = opts.tie_embeddings ? embed : w.matrix("output.weight", mc.vocab, H);
  std::vector<std::string> names;
  for (auto& t : file->tensors()) names.push_back(t.name);
  check_layer_count(numbered_layer_count(names, "blk."), mc.num_layers, path, a->gguf + std::string(".block_count"), "blk.");
  HfLayerSpec spec;
  spec.in_width = spec.hidden = H;
  spec.intermediate = mc.intermediate;
  spec.head_dim = hd;
  spec.q_dim = qd;
  spec.kv_dim = kvd;
  spec.qkv_bias = a->qkv_bias;
  spec.qk_norm = a->qk_norm;
  std::vector<DecoderLayerWeights> layers(size_t(mc.num_layers));
  for (int l = 0; l < mc.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const std::string q = p + layer_tensor_name(LayerTensor::Q, Naming::Gguf), k = p + layer_tensor_name(LayerTensor::K, Naming::Gguf);
    layers[size_t(l)] = read_layer(
        p, spec, Naming::Gguf,
        [&](const std::string& n, int64_t rows, int64_t cols) {  // q and k rows permuted for llama.cpp's RoPE
          const int heads = !a->permuted_qk ? 0 : n == q ? mc.num_heads : n == k ? mc.num_kv_heads : 0;
          return w.matrix(n, rows, cols, heads);
        },
        [&](const std::string& n, int64_t len) { return w.vector(n, len); });
  }
  mc.dtype_name = file_type_name(*file);
  const std::vector<float> final_norm = w.vector("output_norm.weight", H);
  Rope rope = Rope::from_config(cfg, int(hd));
  mc.set_rope(rope);
  return std::make_unique<DecoderModel>(mc, opts, std::move(rope), std::move(store), embed, lm_head, final_norm,
                                        std::move(layers));
}

}  // namespace eaglet
