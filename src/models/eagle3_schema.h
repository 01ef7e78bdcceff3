// The EAGLE-3 checkpoint schema, written once: the tensors a draft checkpoint holds besides its
// decoder layers' (which models/layer_weights.h names), each with its Hugging Face name (as EAGLE,
// SpecForge, TorchSpec, vLLM and speculators save it), its name in llama.cpp's `eagle3` GGUF files,
// and its shape from the draft's dimensions; and where the layers live. The loader (eagle3.cpp),
// the GGUF reader (eagle3_gguf.cpp), widening (convert/widen.cpp), the trainer's load and the export
// (train/draft_io.cpp, train/draft_export.cpp) take names and shapes from here.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/eagle3_config.h"
#include "models/layer_weights.h"

namespace eaglet::eagle3 {

enum class Tensor {
  Fc,          // [hidden, 3 * target_hidden]: the three tapped layers into the draft's width
  InputNorm,   // [3 * target_hidden]: RMSNorm before fc (norm_before_fc)
  FcNorm0, FcNorm1, FcNorm2,  // [target_hidden]: EAGLE-3.1's per-tap norms (fc_norm)
  Norm,        // [hidden]: the final norm
  LmHead,      // [draft_vocab, hidden]; absent: the target's
  Embed,       // [vocab, hidden]; absent: the target's
  D2t,         // [draft_vocab] int64: target id minus draft id (pruned vocabularies)
  T2d,         // [vocab] bool: in the draft vocabulary (written for vLLM; nothing reads it)
  HiddenNorm,  // [hidden], per layer: the norm of the hidden half of layer 0's input
};

// What the shapes depend on. `layer` is layer 0's (its attention reads [embedding, hidden]).
struct Dims {
  HfLayerSpec layer;
  int64_t target_hidden = 0, vocab = 0, draft_vocab = 0;
};
// The dimensions of a draft of config `c`.
Dims dims(const Eagle3Config& c);

struct TensorSpec {
  Tensor id;
  const char* hf;    // Hugging Face name (HiddenNorm: after the layer's prefix)
  const char* gguf;  // llama.cpp's name (HiddenNorm: after "blk.N."); "" where it has none
};
const TensorSpec& spec(Tensor t);
std::vector<int64_t> shape(Tensor t, const Dims& d);

// Layer 0's prefix is "midlayer." (EAGLE, SpecForge, TorchSpec) or "layers.0." (vLLM renames the
// first to the second); layer i > 0 is "layers.i.".
inline constexpr std::string_view kMidlayer = "midlayer.", kLayer0 = "layers.0.";
std::string layer_prefix(int layer, std::string_view first);
// kMidlayer or kLayer0, whichever the checkpoint `has` layer 0's q_proj under; "" if neither.
std::string first_layer_prefix(const std::function<bool(const std::string&)>& has);

// A Hugging Face name (layer tensors under `layer_prefix`) as llama.cpp names it in a one-layer
// GGUF draft; the name itself where llama.cpp has none (EAGLE-3.1's fc_norm.*).
std::string gguf_name(const std::string& hf, std::string_view layer_prefix);

}  // namespace eaglet::eagle3
