// A draft model behind a proposer: an EAGLE-3 or a DFlash draft, held by shared pointer so that
// the engine's proposer, the SpecSetup that loaded it and the versions a server with online
// training keeps can share one copy. A server swaps one ServedDraft for another of the same kind
// and shape (docs/online-training.md).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/dflash.h"
#include "models/eagle3.h"
#include "speculation/proposer.h"

namespace eaglet {

// The draft model a proposer reads from --draft.
enum class DraftKind { None, Eagle3, DFlash };

class ServedDraft {
 public:
  explicit ServedDraft(std::shared_ptr<const Eagle3Draft> d);
  explicit ServedDraft(std::shared_ptr<const DFlashDraft> d);
  // `dir` as a draft of `kind` (Eagle3 or DFlash) for `target`; `lo` applies to EAGLE-3 drafts,
  // `quantize` (--draft-quantize) to both.
  static std::shared_ptr<const ServedDraft> load(DraftKind kind, const std::string& dir, const Model& target,
                                                 const Eagle3LoadOptions& lo = {},
                                                 kernels::QuantScheme quantize = kernels::QuantScheme::None);

  DraftKind kind() const { return eagle3_ ? DraftKind::Eagle3 : DraftKind::DFlash; }
  const char* method() const { return eagle3_ ? "eagle3" : "dflash"; }  // the proposer's name
  const Eagle3Draft* eagle3() const { return eagle3_.get(); }
  const DFlashDraft* dflash() const { return dflash_.get(); }
  // Every matrix its forwards multiply by (`eaglet bench` names their kernels).
  std::vector<const kernels::WeightView*> matrices() const { return eagle3_ ? eagle3_->matrices() : dflash_->matrices(); }
  // Target layers it reads (the proposer's tap_layers()).
  std::vector<int> taps() const;
  size_t kv_block_bytes() const;
  // A proposer over `kv_blocks` draft KV blocks, forwards on `pool`; it reads this draft, which
  // must outlive it.
  std::unique_ptr<Proposer> new_proposer(int64_t kv_blocks, ThreadPool& pool) const;
  // Throws naming what differs when `next` cannot take this draft's place in a running engine
  // (its kind, taps, KV shape, block size): the cache and the step plan were sized for this one.
  void check_replaceable_by(const ServedDraft& next) const;

 private:
  std::shared_ptr<const Eagle3Draft> eagle3_;
  std::shared_ptr<const DFlashDraft> dflash_;
};

}  // namespace eaglet
