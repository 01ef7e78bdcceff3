#include "speculation/served_draft.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "speculation/dflash_proposer.h"
#include "speculation/eagle3_proposer.h"

namespace eaglet {

ServedDraft::ServedDraft(std::shared_ptr<const Eagle3Draft> d) : eagle3_(std::move(d)) {
  EAGLET_CHECK(eagle3_, "ServedDraft: no EAGLE-3 draft given");
}

ServedDraft::ServedDraft(std::shared_ptr<const DFlashDraft> d) : dflash_(std::move(d)) {
  EAGLET_CHECK(dflash_, "ServedDraft: no DFlash draft given");
}

std::shared_ptr<const ServedDraft> ServedDraft::load(DraftKind kind, const std::string& dir, const Model& target,
                                                     const Eagle3LoadOptions& lo, kernels::QuantScheme quantize) {
  EAGLET_CHECK(kind != DraftKind::None, "ServedDraft::load: no draft kind for {}", dir);
  if (kind == DraftKind::DFlash) {
    std::shared_ptr<DFlashDraft> d = DFlashDraft::load(dir, target);
    d->quantize_weights(quantize);
    return std::make_shared<const ServedDraft>(std::shared_ptr<const DFlashDraft>(std::move(d)));
  }
  std::shared_ptr<Eagle3Draft> d = Eagle3Draft::load(dir, target, lo);
  d->quantize_weights(quantize);
  return std::make_shared<const ServedDraft>(std::shared_ptr<const Eagle3Draft>(std::move(d)));
}

std::vector<int> ServedDraft::taps() const { return eagle3_ ? eagle3_->config().aux_layers : dflash_->config().taps; }

size_t ServedDraft::kv_block_bytes() const {
  return eagle3_ ? eagle3_->kv_shape(1).bytes_per_block() : dflash_->kv_shape(1).bytes_per_block();
}

std::unique_ptr<Proposer> ServedDraft::new_proposer(int64_t kv_blocks, ThreadPool& pool) const {
  if (eagle3_) return std::make_unique<Eagle3Proposer>(*eagle3_, kv_blocks, pool);
  return std::make_unique<DFlashProposer>(*dflash_, kv_blocks, pool);
}

void ServedDraft::check_replaceable_by(const ServedDraft& next) const {
  EAGLET_CHECK(next.kind() == kind(), "the new draft is {}, the engine serves {}", next.method(), method());
  EAGLET_CHECK(next.taps() == taps(), "the new draft taps target layers {}, the one in use {}", fmt::join(next.taps(), ","),
               fmt::join(taps(), ","));
  EAGLET_CHECK(next.kv_block_bytes() == kv_block_bytes(),
               "the new draft's KV shape differs from the one the cache was sized for");
  if (dflash_)
    EAGLET_CHECK(next.dflash_->config().block_size == dflash_->config().block_size,
                 "the new DFlash draft's block is {} tokens, the one in use {}", next.dflash_->config().block_size,
                 dflash_->config().block_size);
}

}  // namespace eaglet
