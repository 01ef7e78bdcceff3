// EAGLE-3 drafts from llama.cpp's GGUF files (architecture `eagle3`, written by its
// convert_hf_to_gguf.py given --target-model-dir). The metadata becomes the draft's config.json
// fields and the tensors are read under their Hugging Face names through a name map, so config
// checks, RoPE and the forward are the safetensors path's own.
//
// llama.cpp's file differs from the Hugging Face checkpoint in three ways, undone here: q and k
// rows are permuted for its interleaved RoPE; d2t holds absolute target ids (HF: offsets); and
// the aux layer ids (`eagle3.target_layers`) count "the residual stream entering layer j", which
// is eaglet's own numbering.
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "io/gguf.h"
#include "models/eagle3.h"
#include "models/eagle3_schema.h"
#include "models/gguf_weights.h"

namespace eaglet {

namespace {

// The draft config.json fields of an `eagle3` GGUF file's metadata.
nlohmann::json draft_config(const GgufFile& f) {
  const nlohmann::json& m = f.metadata();
  nlohmann::json hf = gguf_llama_config(f, "eagle3");
  EAGLET_CHECK(hf["num_hidden_layers"] == 1, "{}: an EAGLE-3 draft has one layer, not eagle3.block_count = {}",
               f.path(), hf["num_hidden_layers"].dump());
  auto it = m.find("eagle3.target_layers");
  if (it == m.end() || !it->is_array() || it->size() != 3)
    fail("{}: metadata 'eagle3.target_layers' must list 3 target layers, not {}", f.path(),
         it == m.end() ? std::string("nothing") : it->dump());
  hf["eagle_aux_hidden_state_layer_ids"] = *it;
  for (const char* key : {"eagle3.target_hidden_size", "eagle3.vocab_size"})
    if (!m.contains(key) || !m[key].is_number()) fail("{}: metadata '{}' is missing", f.path(), key);
  hf["target_hidden_size"] = m["eagle3.target_hidden_size"];
  hf["vocab_size"] = m["eagle3.vocab_size"];
  hf["norm_before_residual"] = m.value("eagle3.norm_before_residual", false);
  hf["norm_before_fc"] = m.value("eagle3.norm_before_fc", false);
  // The draft vocabulary: d2t's length, else the output head's rows, else the target's.
  if (const GgufTensor* d2t = f.find(eagle3::spec(eagle3::Tensor::D2t).gguf)) hf["draft_vocab_size"] = d2t->dims[0];
  else if (const GgufTensor* out = f.find(eagle3::spec(eagle3::Tensor::LmHead).gguf); out && out->dims.size() == 2) hf["draft_vocab_size"] = out->dims[1];
  return hf;
}

}  // namespace

std::unique_ptr<Eagle3Draft> Eagle3Draft::load_gguf(const std::string& path, const Model& target) {
  auto file = std::make_shared<const GgufFile>(path);
  const std::string arch = file->metadata().value("general.architecture", "");
  if (arch != "eagle3") fail("{}: GGUF architecture '{}' is not an EAGLE-3 draft ('eagle3')", path, arch);
  const JsonConfig cfg(draft_config(*file), path + " (GGUF metadata)");
  Eagle3Config c = parse_eagle3_config(cfg, target.config().num_layers, {.numbering = AuxNumbering::Input});
  c.key_prefix = "blk.0.";
  std::unique_ptr<Eagle3Draft> d(new Eagle3Draft(c, Rope::from_config(cfg, c.head_dim), target, Unloaded{}));
  GgufWeights w(file, &d->weights_);
  Eagle3TensorSource src;
  src.where = path;
  // Tensors are asked for by their Hugging Face names, layer 0 under the prefix "blk.0.".
  auto name_of = [&](const std::string& hf) { return eagle3::gguf_name(hf, c.key_prefix); };
  const std::string q = c.key_prefix + layer_tensor_name(LayerTensor::Q, Naming::HuggingFace);
  const std::string k = c.key_prefix + layer_tensor_name(LayerTensor::K, Naming::HuggingFace);
  src.has = [&](const std::string& name) { return w.has(name_of(name)); };
  src.matrix = [&](const std::string& name, int64_t rows, int64_t cols) {  // q and k rows permuted for llama.cpp's RoPE
    return w.matrix(name_of(name), rows, cols, name == q ? c.num_heads : name == k ? c.num_kv_heads : 0);
  };
  src.vector = [&](const std::string& name, int64_t n) { return w.vector(name_of(name), n); };
  src.d2t = [&](int64_t n) {
    std::vector<int64_t> ids = w.ints(eagle3::spec(eagle3::Tensor::D2t).gguf, n);
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] -= i;
    return ids;
  };
  d->load_weights(src);
  return d;
}

}  // namespace eaglet
