#include "train/draft_export.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/eagle3.h"
#include "models/eagle3_schema.h"

namespace eaglet {

void write_draft_export(const std::string& dir, const DraftExport& d, const std::string& key_style,
                        const std::string& dtype) {
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = eagle3_config_json(d.config, d.rope, d.max_position);
  cfg["torch_dtype"] = dtype;
  // How it was trained, for whoever resumes or compares it (servers ignore it).
  cfg["eaglet_training"] = {{"loss_mask_alignment", d.loss_mask_alignment}, {"rope_theta_from", d.rope_source}};
  std::ofstream(dir + "/config.json") << cfg.dump(2) << "\n";
  const std::string prefix(key_style == "vllm" ? eagle3::kLayer0 : eagle3::kMidlayer);
  const std::string_view from = DraftExport::kLayerPrefix;
  const DType dt = dtype == "bfloat16" ? DType::BF16 : DType::F32;
  std::vector<TensorToWrite> ts;
  for (auto& [name, t] : d.tensors) {
    std::string key = name.starts_with(from) ? prefix + name.substr(from.size()) : name;
    std::string bytes;
    if (dt == DType::F32) {
      bytes.assign(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
    } else {
      bytes.resize(t.data.size() * 2);
      for (size_t i = 0; i < t.data.size(); ++i) {
        const bf16_t b = f32_to_bf16(t.data[i]);
        std::memcpy(&bytes[i * 2], &b, 2);
      }
    }
    ts.push_back({key, dt, t.shape, std::move(bytes)});
  }
  if (!d.vocab_map.d2t.empty() && d.config.draft_vocab < d.config.vocab) {
    ts.push_back({eagle3::spec(eagle3::Tensor::D2t).hf, DType::I64, {int64_t(d.vocab_map.d2t.size())},
                  std::string(reinterpret_cast<const char*>(d.vocab_map.d2t.data()), d.vocab_map.d2t.size() * 8)});
    ts.push_back({eagle3::spec(eagle3::Tensor::T2d).hf, DType::BOOL, {int64_t(d.vocab_map.t2d.size())},
                  std::string(reinterpret_cast<const char*>(d.vocab_map.t2d.data()), d.vocab_map.t2d.size())});
  }
  write_safetensors(dir + "/model.safetensors", ts, {{"format", "pt"}});
}

}  // namespace eaglet
