// Function-preserving widening: a small Llama checkpoint becomes a larger one (more hidden dims,
// heads, head dims, MLP width and layers) that computes the same logits up to float rounding, and
// an EAGLE-3 or DFlash draft trained against the small target becomes one that pairs with the
// wide target.
// The result has a real model's token behaviour at a large model's cost per token: what speed
// work and the demo need on a machine that cannot train a 1B model.
//
// How the function survives (each new weight is either cancelled or zero):
//   - the residual stream keeps the original values in its first d dims and exact zeros in the
//     rest: embeddings, o_proj and down_proj rows beyond d are zero;
//   - RMSNorm over D dims of which d are live is sqrt(d/D) times smaller, so norm weights are
//     scaled by sqrt(d/D) and eps by d/D;
//   - an original head's dim pair (m, m + hd/2) goes to (s*m, HD/2 + s*m), s = HD/hd, which has
//     the same RoPE frequency; q is scaled by sqrt(HD/hd) to undo the larger 1/sqrt(HD); k is zero
//     on every other dim of a live kv head, so the extra q dims add nothing to the scores;
//   - extra heads, MLP rows and layers carry dense random weights whose outputs meet only zero
//     columns of o_proj / down_proj; extra layers add exactly zero to the residual stream.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace eaglet {

struct WidenShape {  // defaults: TinyLlama-1.1B
  int hidden = 2048, heads = 32, kv_heads = 4, head_dim = 64, intermediate = 5632, layers = 22;
  DType dtype = DType::BF16;
  float noise = 0.02f;  // standard deviation of the cancelled filler weights
  uint64_t seed = 0;
};

// Which layer of the wide model carries original layer i (spread evenly, first and last kept).
std::vector<int> widened_live_layers(int small_layers, int wide_layers);

// Writes a LlamaForCausalLM directory (config, model.safetensors, tokenizer files copied) of
// `shape` that computes what the Llama at `src_dir` computes. config.json records the origin
// under "widened_from" (hidden_size, num_hidden_layers, live_layers), which widen_eagle3 reads.
void widen_llama(const std::string& src_dir, const std::string& out_dir, const WidenShape& shape);

// Widens an EAGLE-3 draft (LlamaForCausalLMEagle3 layout, midlayer.* or layers.0.* keys) trained
// against the small target so it pairs with `wide_target_dir` (written by widen_llama): same hidden
// size and head layout as the wide target, MLP as wide as the wider of the two, aux-layer ids
// mapped onto the live layers. `shape` supplies dtype, noise and seed.
void widen_eagle3(const std::string& draft_dir, const std::string& wide_target_dir, const std::string& out_dir,
                  const WidenShape& shape);

// Widens a DFlash draft (DFlashDraftModel, Qwen3 layers with per-head q/k norms) the same way:
// the wide target's hidden size and head layout, target_layer_ids moved onto the wide layers that
// carry those outputs, block size and mask token unchanged.
void widen_dflash(const std::string& draft_dir, const std::string& wide_target_dir, const std::string& out_dir,
                  const WidenShape& shape);

// widen_dflash for a DFlashDraftModel config, else widen_eagle3.
void widen_draft(const std::string& draft_dir, const std::string& wide_target_dir, const std::string& out_dir,
                 const WidenShape& shape);

}  // namespace eaglet
