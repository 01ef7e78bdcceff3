// MiniMax-M2 (`MiniMaxM2ForCausalLM`): every layer is full attention with one RMSNorm over all
// heads' q and k ("per_layer"), and a sigmoid-routed MoE without a shared expert.
#include "models/minimax/minimax_model.h"
#include "models/registry.h"

namespace eaglet {

void register_minimax_m2(ModelRegistry& r) {
  r.add("MiniMaxM2ForCausalLM", [](const std::string& dir, const JsonConfig& cfg) {
    MiniMaxConfig m = parse_minimax_m2_config(cfg, dir);
    m.base.architecture = "MiniMaxM2ForCausalLM";
    return load_minimax(dir, std::move(m), cfg);
  });
}

}  // namespace eaglet
