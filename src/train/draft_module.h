// The EAGLE-3 draft as a libtorch module, for training. Same math as models/eagle3 (a test holds
// the two to 1e-4 on exported weights), plus the training-time-test unroll: step 0 reads
// g = fc(aux); step i reads the draft's own step i-1 output, with tokens shifted left by i and
// positions arange(T) + i. EAGLE-3.1 (the config's fc_norm and norm_output, as the MiniMax-M3
// draft has them): each tap is RMS-normed before fc, and the state fed back is norm(out), the
// vLLM / speculators / TorchSpec reading. Attention at step i is causal over step-0 keys plus the "diagonal"
// keys of steps 1..i (EAGLE-3's cache_hidden scheme). libtorch appears only under train/.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "train/draft_options.h"

namespace eaglet {


struct DraftModuleImpl : torch::nn::Module {
  explicit DraftModuleImpl(const DraftModuleOptions& o);

  // One draft step over a batch: tokens [B, T] (target ids), g [B, T, H], positions start at
  // `pos0`. `keys`/`values` hold earlier TTT steps' K/V [B, nkv, T, hd] (step 0 first) and get
  // this step's appended. Returns {logits [B, T, Vd], the next g [B, T, H]}.
  std::pair<torch::Tensor, torch::Tensor> step(const torch::Tensor& tokens, const torch::Tensor& g, int64_t pos0,
                                               std::vector<torch::Tensor>& keys, std::vector<torch::Tensor>& values);
  // g [B, T, H] from the three taps aux [B, T, 3 Ht].
  torch::Tensor fuse(const torch::Tensor& aux);

  DraftModuleOptions opts;
  torch::nn::Linear fc{nullptr}, q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr}, lm_head{nullptr};
  torch::Tensor input_layernorm, hidden_norm, post_attention_layernorm, norm;
  std::vector<torch::Tensor> fc_norms;  // [Ht] per tap with fc_norm, else empty
  torch::Tensor embed;     // [V, H], frozen copy of the target's
  torch::Tensor inv_freq;  // [hd / 2]
};
TORCH_MODULE(DraftModule);

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps);
// RoPE as models/rope applies it (halves rotated): x [..., hd] with cos / sin [..., hd / 2].
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
// cos and sin [..., hd / 2] of `positions` (any shape) at `rope`'s frequencies and position scale.
std::pair<torch::Tensor, torch::Tensor> rope_angles(const Rope& rope, const torch::Tensor& inv_freq,
                                                    const torch::Tensor& positions);

// EAGLE-3 cache_hidden attention for one TTT step. q [B, nh, T, hd]; keys/values: per step
// [B, nkv, T, hd], step 0 first, the current step last. Causal over step 0, diagonal over the rest.
torch::Tensor ttt_attention(const torch::Tensor& q, const std::vector<torch::Tensor>& keys,
                            const std::vector<torch::Tensor>& values);

// Which loss-mask entry scores TTT index t at step 0 (index t reads f_t and x_{t+1} and is scored
// against the target's distribution at t + 1, i.e. it predicts x_{t+2}).
enum class LossMaskAlignment {
  TorchSpec,  // loss_mask[t], as TorchSpec and SpecForge index it (the mask is not shifted)
  NextToken,  // loss_mask[t + 1] (eaglet before: the token the index reads)
};

struct TttBatch {
  torch::Tensor ids;            // [B, T] target token ids
  torch::Tensor aux;            // [B, T, 3H]
  torch::Tensor target_logits;  // [B, T, V] from the target's final norm + lm_head on last_hidden
  torch::Tensor loss_mask;      // [B, T] float
  torch::Tensor valid;          // [B, T] float: 1 on real tokens, 0 on padding (undefined: all real)
  LossMaskAlignment alignment = LossMaskAlignment::TorchSpec;
};

// 1 on real tokens, 0 on padding ([B, T] float): the batch's `valid`, or all ones without it.
torch::Tensor real_tokens(const TttBatch& b);

// The positions that may be scored at TTT step `step`: the aligned loss mask, shifted left once
// per step, and never one whose target lies past the sequence's end (SpecForge scores those
// against a zero-padded, uniform target; they carry no signal).
torch::Tensor ttt_step_mask(const TttBatch& b, int step);

struct TttResult {
  torch::Tensor loss;                // weighted sum over steps (differentiable)
  std::vector<double> step_loss;     // per step
  std::vector<double> step_correct;  // per step: positions where draft argmax == target argmax
  std::vector<double> step_valid;    // per step: positions counted
  // Drafts whose acceptance was counted directly and the tokens they would have gained (DFlash
  // blocks); zero where acceptance is simulated from the per-step accuracy (EAGLE-3).
  double accepted = 0, drafts = 0;
};

// The training-time-test unroll and loss (forward KL against the target restricted to the draft
// vocabulary, mean over valid positions, step weights step_weight^i). `draft_to_target` [Vd]
// (int64) lists the target id of each draft id; `in_draft` [V] (bool) is t2d.
// `denominators` (per step): the positions counted over the whole global batch, so that ranks
// holding parts of it produce gradients that sum to the one-rank gradient; null: this batch's.
TttResult ttt_forward(DraftModule& m, const TttBatch& b, int steps, double step_weight,
                      const torch::Tensor& draft_to_target, const torch::Tensor& in_draft,
                      const std::vector<double>* denominators = nullptr);
// Per step, the positions ttt_forward scores in `b` (its default denominators).
std::vector<double> ttt_valid_counts(const TttBatch& b, int steps, const torch::Tensor& in_draft);

}  // namespace eaglet
