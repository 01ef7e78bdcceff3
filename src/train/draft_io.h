// The draft module's way in and out, shared by the offline trainer and the online one: hidden
// samples into TTT batches (the target's logits computed from the last-layer rows), an exported
// Hugging Face draft into a module, and a module back into an export.
#pragma once
#include <string>
#include <vector>

#include "train/draft_export.h"
#include "train/draft_module.h"
#include "train/hidden_stream.h"
#include "train/vocab_mapping.h"

namespace eaglet {

// A weight matrix as an F32 tensor [rows, cols] (a copy).
torch::Tensor weight_tensor(const kernels::WeightView& w);

// Pads `samples` into one batch; the target's logits come from each sample's last-layer rows
// through the target's final norm and lm_head, on `pool`.
TttBatch make_batch(ThreadPool& pool, const Model& target, const std::vector<HiddenSample>& samples,
                    LossMaskAlignment alignment);
// The same over samples held elsewhere (not copied).
TttBatch make_batch(ThreadPool& pool, const Model& target, const std::vector<const HiddenSample*>& samples,
                    LossMaskAlignment alignment);

// A draft the module trains, with what goes with it.
struct TrainableDraft {
  DraftModule module{nullptr};  // its opts: the draft's config (aux layers too) and RoPE
  VocabMapping vocab_map;       // d2t offsets and t2d
  torch::Tensor d2t_index;      // [Vd] int64: target id of each draft id
  torch::Tensor in_draft;       // [V] bool
};

// Loads an exported draft (eaglet's, or any EAGLE-3 or EAGLE-3.1 Llama draft: one layer, no
// norm_before_fc, norm_before_residual or attention bias, which the module does not model) for
// `target`; another flavour is an error naming what the module lacks.
TrainableDraft load_trainable_draft(const std::string& dir, const Model& target);
// `m`'s weights and settings as an export for `target`.
DraftExport export_module(const DraftModule& m, const ModelConfig& target, const VocabMapping& vmap);
// Per-TTT-step accuracy of `m` on `samples` (no gradients): positions where the draft's argmax is
// the target's, over the positions scored; summed counts in `counts` ([correct..., valid...]).
std::vector<double> ttt_accuracy(DraftModule& m, const torch::Tensor& d2t_index, const torch::Tensor& in_draft,
                                 ThreadPool& pool, const Model& target,
                                 const std::vector<HiddenSample>& samples, int steps, int batch_size,
                                 LossMaskAlignment alignment, std::vector<double>* counts = nullptr);

}  // namespace eaglet
