// MiniMax-M3: the text model `MiniMaxM3SparseForCausalLM`, and the multimodal release
// `MiniMaxM3SparseForConditionalGeneration`, whose language model sits under `text_config` and the
// `language_model.` tensor prefix (vision and MTP tensors are left unread).
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/minimax/minimax_model.h"
#include "models/registry.h"

namespace eaglet {

namespace {

void log_skipped(const std::string& dir) {
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  size_t vision = 0, mtp = 0;
  for (const auto& n : ckpt.names()) {
    if (n.rfind("language_model.model.mtp.", 0) == 0) ++mtp;
    else if (n.rfind("language_model.", 0) != 0) ++vision;
  }
  if (vision || mtp)
    spdlog::info("{}: text model only; skipping {} vision/projector and {} MTP tensors", dir, vision, mtp);
}

}  // namespace

void register_minimax_m3(ModelRegistry& r) {
  r.add("MiniMaxM3SparseForCausalLM", [](const std::string& dir, const JsonConfig& cfg) {
    MiniMaxConfig m = parse_minimax_m3_config(cfg, cfg, dir);
    m.base.architecture = "MiniMaxM3SparseForCausalLM";
    return load_minimax(dir, std::move(m), cfg);
  });
  r.add("MiniMaxM3SparseForConditionalGeneration", [](const std::string& dir, const JsonConfig& cfg) {
    if (!cfg.has("text_config")) fail("{}: missing field 'text_config'", cfg.where());
    const JsonConfig text = cfg.sub("text_config");
    MiniMaxConfig m = parse_minimax_m3_config(cfg, text, dir);
    m.base.architecture = "MiniMaxM3SparseForConditionalGeneration";
    m.prefix = "language_model.";
    // Special ids are often only at the top level of the wrapper's config.
    if (m.base.bos_token < 0) m.base.bos_token = int(cfg.get_int("bos_token_id", -1));
    if (m.base.eos_tokens.empty() && cfg.has("eos_token_id"))
      for (auto e : cfg.get_int_list("eos_token_id")) m.base.eos_tokens.push_back(int(e));
    log_skipped(dir);
    return load_minimax(dir, std::move(m), text);
  });
}

}  // namespace eaglet
