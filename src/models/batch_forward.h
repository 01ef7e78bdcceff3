// The parts of a batched forward that every target architecture shares: reserving cache space
// all-or-nothing, laying out token slots, collecting hidden-state taps and computing the logits
// of the requested rows. Architectures only supply their layers.
#pragma once
#include <functional>
#include <vector>

#include "models/attention.h"
#include "models/model.h"
#include "models/scratch.h"

namespace eaglet {

// The buffers run_forward reuses between forwards: the residual stream, the logit rows and the
// token layout. Part of each architecture's scratch set (models/scratch.h).
struct ForwardScratch {
  ScratchBuffer residual, selected;
  std::vector<int> tokens;
  std::vector<TokenSlot> slots;
};

// A whole forward around an architecture's layers: reserve cache space, embed, run `layer(l,
// slots, x)` for every layer collecting taps, then the logits of the requested rows.
using LayerFn = std::function<void(int layer, const std::vector<TokenSlot>& slots, float* x)>;
void run_forward(ThreadPool& pool, const Model& model, KvCache& cache, const ForwardBatch& batch,
                 const LayerFn& layer, ForwardScratch& scratch, ForwardOutput* out);

// Reserves room for every chunk (a full cache leaves every sequence as it was and throws) and
// lays out the batch's tokens with their slots, in chunk order.
void reserve_batch(KvCache& cache, const ForwardBatch& batch, int max_position, std::vector<int>* tokens,
                   std::vector<TokenSlot>* slots);

// Copies the residual stream into ForwardOutput::taps whenever it reaches a requested layer id.
class TapCollector {
 public:
  TapCollector(const ForwardBatch& batch, int num_layers, int64_t T, int64_t H, ForwardOutput* out);
  void take(int layer_id, const float* x);

 private:
  const std::vector<int>& ids_;
  int64_t T_, H_;
  ForwardOutput* out_;
};

// Marks the batch's tokens as cached, then fills out->logits for each chunk's logit_rows.
void finish_forward(ThreadPool& pool, KvCache& cache, const ForwardBatch& batch, const float* x, int64_t H,
                    int vocab, const std::function<void(const float*, int64_t, float*)>& final_norm,
                    const kernels::WeightView& lm_head, ScratchBuffer& selected, ForwardOutput* out);

}  // namespace eaglet
