// The DFlash block draft as a libtorch module, for training: the math of models/dflash (a test
// holds the two together on exported weights), batched over many blocks at once. Its parameter
// names are the published checkpoint's (fc.weight, hidden_norm.weight, layers.N.self_attn.*), so
// the export is named_parameters() as it stands.
//
// Training follows the published recipe (SpecForge, speculators): per sequence, random anchors
// among the supervised positions; the block at anchor a is [x_a, MASK x (B - 1)] at positions
// a..a+B-1; it sees the target's fused features of positions < a (the context the engine holds
// when x_a is the last verified token) and itself in both directions (narrowed in sliding-window
// and causal layers as the engine narrows them), never another block; slot
// k predicts x_{a+k}, slot 0 is not scored, and slot k's loss weighs exp(-(k - 1) / gamma). The
// loss is the cross-entropy against the target's distribution at a + k - 1 (soft labels, as
// eaglet's EAGLE-3 loss), which equals hard-label cross-entropy up to a constant when the target
// is greedy. Acceptance needs no simulation: a block never reads its own drafts, so the tokens a
// greedy verifier accepts are 1 + the leading slots whose argmax is the target's.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "train/draft_module.h"
#include "train/draft_options.h"

namespace eaglet {

struct RmsNormImpl : torch::nn::Module {
  RmsNormImpl(int64_t n, double eps);
  torch::Tensor forward(const torch::Tensor& x) { return rms_norm(x, weight, eps); }
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(RmsNorm);

struct DFlashAttentionImpl : torch::nn::Module {
  explicit DFlashAttentionImpl(const DFlashConfig& c);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};
};
TORCH_MODULE(DFlashAttention);

struct DFlashMlpImpl : torch::nn::Module {
  explicit DFlashMlpImpl(const DFlashConfig& c);
  torch::Tensor forward(const torch::Tensor& x) { return down_proj(torch::silu(gate_proj(x)) * up_proj(x)); }
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(DFlashMlp);

// The blocks' geometry for one forward, shared by every layer.
struct BlockLayout {
  int64_t blocks = 0, size = 0;       // A blocks of B tokens per sequence
  torch::Tensor block_cos, block_sin;  // [batch, 1, A * B, hd / 2]
  torch::Tensor ctx_cos, ctx_sin;      // [T, hd / 2]
  torch::Tensor ctx_visible;           // [batch, 1, A * B, T] bool: context keys each block row sees
  torch::Tensor row_pos;               // [batch, 1, A * B, 1] each block row's position
};

// Layer `index` of the draft: full attention, or a sliding window and / or causal order within
// the block as the config resolves them (the engine's DFlashDraft::attention_slots).
struct DFlashLayerImpl : torch::nn::Module {
  DFlashLayerImpl(const DFlashConfig& c, int index);
  // x [batch, A * B, H] (the blocks' rows), ctx [batch, T, H] (fused context features).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& ctx, const BlockLayout& l);
  torch::Tensor context_hidden(const BlockLayout& l, int64_t T) const;  // [batch, 1, A * B, T] bool
  torch::Tensor block_hidden(int64_t S) const;                          // [B, B] bool
  DFlashConfig cfg;
  DFlashConfig::LayerAttention attention;
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  DFlashAttention self_attn{nullptr};
  DFlashMlp mlp{nullptr};
};
TORCH_MODULE(DFlashLayer);

struct DFlashModuleImpl : torch::nn::Module {
  explicit DFlashModuleImpl(const DFlashModuleOptions& o);
  // hidden_norm(fc(features)): features [batch, T, taps * Ht] -> [batch, T, H].
  torch::Tensor context(const torch::Tensor& features);
  // Logits [batch, A, B - 1, V] of slots 1..B-1 of the blocks at `anchors` [batch, A] (int64),
  // whose first tokens are `first` [batch, A]; ctx from context(); a block sees context rows
  // before its anchor.
  torch::Tensor forward(const torch::Tensor& ctx, const torch::Tensor& first, const torch::Tensor& anchors);

  DFlashModuleOptions opts;
  torch::nn::Linear fc{nullptr};
  RmsNorm hidden_norm{nullptr}, norm{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::Tensor embed, lm_head;  // the target's [V, H], frozen (not parameters, not checkpointed)
  torch::Tensor inv_freq;
};
TORCH_MODULE(DFlashModule);

// Anchors of one batch: [batch, A] positions and which are real (rows have different counts).
struct Anchors {
  torch::Tensor pos, real;
};
// Eligible anchors: 1 <= a, with a and a + 1 inside the sequence and supervised. Training
// draws up to `max_per_sequence` of them per sequence at random, row i from a generator seeded
// with `seeds[i]` (the sample's place in the run: the same draw however many ranks share the
// batch, and after a resume); without seeds, every eligible anchor (evaluation).
Anchors draw_anchors(const TttBatch& b, int max_per_sequence, const std::vector<uint64_t>* seeds);

// The loss over the blocks at `a` (see the file comment), per-slot loss / accuracy counts, and
// the counted acceptance of the blocks that lie wholly in the supervised text. `denominator`:
// the global batch's total slot weight (ranks holding parts of it); null: this batch's.
TttResult dflash_forward(DFlashModule& m, const TttBatch& b, const Anchors& a, double gamma,
                         const double* denominator = nullptr);
// The total slot weight dflash_forward divides by.
double dflash_denominator(const TttBatch& b, const Anchors& a, int block_size, double gamma);

}  // namespace eaglet
