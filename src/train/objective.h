// What `eaglet train` optimises, behind one interface: the EAGLE-3 draft under its
// training-time-test unroll, or a DFlash block draft under the block loss. The trainer owns the
// loop, the ranks, the hidden-state stream, checkpoints and metrics; an objective owns the
// module, the loss of a batch, its held-out counts and its export.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "train/draft_module.h"
#include "train/dflash_module.h"
#include "train/hidden_stream.h"
#include "train/train_config.h"
#include "train/vocab_mapping.h"

namespace eaglet {

class DraftObjective {
 public:
  virtual ~DraftObjective() = default;
  virtual torch::nn::Module& module() = 0;
  // Accuracy entries: TTT steps (EAGLE-3) or block slots 1..B-1 (DFlash).
  virtual int slots() const = 0;
  // What a batch's loss needs besides the batch (DFlash's anchors), set before denominators()
  // and loss(); `first_sample`: the run-wide index of the batch's first sample (its draws depend
  // on it only, so ranks and resumed runs draw the same).
  virtual void prepare(const TttBatch& b, int64_t first_sample) { (void)b, (void)first_sample; }
  // The loss denominators of a batch, summed over the ranks and handed back to loss().
  virtual std::vector<double> denominators(const TttBatch& b) = 0;
  virtual TttResult loss(const TttBatch& b, const std::vector<double>* denominators) = 0;
  // Held-out counts without gradients: correct per slot, scored per slot, accepted tokens, drafts.
  virtual std::vector<double> eval_counts(ThreadPool& pool, const Model& target, const std::vector<HiddenSample>& samples,
                                          int batch_size) = 0;
  // The acceptance length the metrics report, from the per-slot accuracy (simulated) or from the
  // counted drafts; and how it was obtained, for the log.
  virtual double acceptance(const std::vector<double>& accuracy, double accepted, double drafts) const = 0;
  virtual std::string acceptance_label() const = 0;
  virtual void write_export(const std::string& dir) = 0;
};

// Which loss-mask entry scores a TTT index, as training.loss_mask_alignment says.
LossMaskAlignment loss_mask_alignment(const TrainConfig& c);

// The EAGLE-3 (or EAGLE-3.1) draft: `mo` its settings, `vmap` its vocabulary; embedding and
// lm_head from the target (lm_head trained, or frozen, as the config says).
std::unique_ptr<DraftObjective> make_eagle3_objective(const TrainConfig& cfg, const Model& target,
                                                      const DraftModuleOptions& mo, const VocabMapping& vmap);
// A DFlash draft of settings `mo`, reading the target's embedding and lm_head.
std::unique_ptr<DraftObjective> make_dflash_objective(const TrainConfig& cfg, const Model& target,
                                                      const DFlashModuleOptions& mo);

// An exported draft with its weights, to train on further (`serve --online-train`): a DFlash draft
// when its config.json says DFlashDraftModel, else an EAGLE-3 / EAGLE-3.1 draft with its own
// lm_head and vocabulary map (load_trainable_draft: what the module lacks is an error naming it).
std::unique_ptr<DraftObjective> load_objective(const TrainConfig& cfg, const std::string& dir, const Model& target);

// The DFlash settings of a recipe for `target`: its shape (the target's unless set), block size,
// mask token and target layers (z-lab's spread unless set).
DFlashModuleOptions dflash_module_options(const TrainConfig& c, const ModelConfig& target);
// An exported DFlash draft directory as a module with the target's embedding and lm_head (tests
// hold it to the engine's forward).
DFlashModule load_dflash_module(const std::string& dir, const Model& target);

}  // namespace eaglet
