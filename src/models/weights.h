// Turns checkpoint tensors into kernel views, in the layout the active kernels read
// (kernels::pack). Matrices the active kernels read as stored (F32, row-major BF16 on AVX2, FP8
// e4m3 + `weight_scale_inv`) are used straight from the memory map, so nothing but headers is read
// at load and experts never routed to are never paged in. Matrices packed at load (BF16 pairs for
// AVX-512 BF16 and AMX) and F16 (widened to F32: no F16 kernels) are copied once, and the
// checkpoint's pages under each copy are given back at once, so a model is never held twice.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_bytes.h"
#include "io/safetensors.h"
#include "kernels/ops.h"

namespace eaglet {

class WeightStore {
 public:
  explicit WeightStore(std::shared_ptr<Checkpoint> ckpt) : ckpt_(std::move(ckpt)) {}
  WeightStore() = default;

  const Checkpoint& checkpoint() const { return *ckpt_; }
  bool has(const std::string& name) const { return ckpt_ && ckpt_->has(name); }
  kernels::WeightView matrix(const std::string& name, int64_t rows, int64_t cols);
  // `w` in the active kernels' layout; a packed copy is owned by the store.
  kernels::WeightView packed(const kernels::WeightView& w);
  // How F8_E4M3 matrices are scaled (from config.json's quantization_config); None rejects them.
  void set_fp8_scheme(kernels::QuantScheme scheme) { fp8_scheme_ = scheme; }
  std::vector<float> vector(const std::string& name, int64_t n);
  // Adopts an owned buffer (built-in model, converted tensors) and returns a view of it.
  kernels::WeightView own(std::vector<float> data, int64_t rows, int64_t cols);
  // Adopts raw bytes (packed, re-ordered or converted tensors) and returns where they live.
  const uint8_t* own_bytes(AlignedBytes bytes);
  // Checkpoint bytes given back after they were copied (packed, converted; see copied()).
  size_t released_bytes() const { return released_bytes_; }
  void count_released(size_t bytes) { released_bytes_ += bytes; }
  // Keeps `owner` (e.g. the mapped GGUF file the views point into) alive as long as the store.
  void hold(std::shared_ptr<const void> owner) { held_.push_back(std::move(owner)); }

  // `w` re-stored as GGUF blocks of `scheme` (Q8_0 / Q4_0 / Q4_K; w.cols whole blocks, F32 or BF16),
  // rows split over `pool`; `option` names what asked for it in errors.
  kernels::WeightView quantized(const kernels::WeightView& w, kernels::QuantScheme scheme, ThreadPool& pool,
                                const std::string& option);
  // Each of `ws` (the matrices of `what`) re-stored as `scheme` in place, on every core (None:
  // nothing), and logged. As llama-quantize does, a matrix whose rows are not whole blocks stays as
  // loaded. Returns how many stayed.
  int quantize_in_place(const std::vector<kernels::WeightView*>& ws, kernels::QuantScheme scheme,
                        const std::string& option, const std::string& what);

 private:
  kernels::WeightView fp8_matrix(const TensorInfo& t, int64_t rows, int64_t cols);

  std::shared_ptr<Checkpoint> ckpt_;
  // A checkpoint tensor read into a copy (packed, converted) gives its memory back at once, so a
  // packed BF16 model is never held twice, not even while it loads; reading it again is an error.
  void copied(const std::string& name);
  size_t released_bytes_ = 0;
  kernels::QuantScheme fp8_scheme_ = kernels::QuantScheme::None;
  std::deque<std::vector<float>> owned_;
  std::deque<AlignedBytes> owned_bytes_;
  std::vector<std::shared_ptr<const void>> held_;
};

}  // namespace eaglet
