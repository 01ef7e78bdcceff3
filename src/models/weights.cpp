#include "models/weights.h"

#include "core/error.h"

namespace eaglet {

kernels::WeightView WeightStore::matrix(const std::string& name, int64_t rows, int64_t cols) {
  const TensorInfo& t = ckpt_->get(name, {rows, cols}, {DType::F32, DType::BF16, DType::F16});
  if (t.dtype == DType::F16) {
    std::vector<float> f(size_t(rows * cols));
    kernels::to_f32(t.dtype, t.data, f.data(), rows * cols);
    return own(std::move(f), rows, cols);
  }
  return kernels::WeightView{t.dtype, t.data, rows, cols};
}

std::vector<float> WeightStore::vector(const std::string& name, int64_t n) {
  const TensorInfo& t = ckpt_->get(name, {n}, {DType::F32, DType::BF16, DType::F16});
  std::vector<float> out(static_cast<size_t>(n));
  kernels::to_f32(t.dtype, t.data, out.data(), n);
  return out;
}

kernels::WeightView WeightStore::own(std::vector<float> data, int64_t rows, int64_t cols) {
  EAGLET_CHECK(int64_t(data.size()) == rows * cols, "internal: owned weight has the wrong size");
  owned_.push_back(std::move(data));
  return kernels::WeightView{DType::F32, owned_.back().data(), rows, cols};
}

}  // namespace eaglet
