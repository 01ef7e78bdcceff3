#include "models/weights.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "kernels/pack.h"

namespace eaglet {

kernels::WeightView WeightStore::matrix(const std::string& name, int64_t rows, int64_t cols) {
  const TensorInfo& t = ckpt_->get(name, {rows, cols}, {DType::F32, DType::BF16, DType::F16, DType::F8_E4M3});
  if (t.dtype == DType::F8_E4M3) return fp8_matrix(t, rows, cols);
  if (t.dtype == DType::F16) {
    std::vector<float> f(size_t(rows * cols));
    kernels::to_f32(t.dtype, t.data, f.data(), rows * cols);
    copied(name);
    return own(std::move(f), rows, cols);
  }
  const kernels::WeightView v = packed(kernels::WeightView{t.dtype, t.data, rows, cols});
  if (v.data != t.data) copied(name);
  return v;
}

void WeightStore::copied(const std::string& name) { released_bytes_ += ckpt_->release(name); }

kernels::WeightView WeightStore::packed(const kernels::WeightView& w) {
  kernels::PackedWeight p = kernels::pack(w);
  if (!p.bytes.empty()) own_bytes(std::move(p.bytes));  // the vector's buffer moves, the view stays valid
  return p.view;
}

kernels::WeightView WeightStore::fp8_matrix(const TensorInfo& t, int64_t rows, int64_t cols) {
  using kernels::QuantScheme;
  if (fp8_scheme_ == QuantScheme::None)
    fail("{}: tensor '{}' is F8_E4M3 but config.json has no fp8/mxfp8 quantization_config", ckpt_->where(), t.name);
  EAGLET_CHECK(cols % kernels::kMxGroup == 0, "{}: FP8 tensor '{}' has {} input columns, not a multiple of {}",
               ckpt_->where(), t.name, cols, kernels::kMxGroup);
  const std::string suffix = ".weight";
  EAGLET_CHECK(t.name.size() > suffix.size() && t.name.ends_with(suffix), "{}: FP8 tensor '{}' is not a '.weight'",
               ckpt_->where(), t.name);
  const std::string scale_name = t.name.substr(0, t.name.size() - suffix.size()) + ".weight_scale_inv";
  if (!ckpt_->has(scale_name))
    fail("{}: FP8 tensor '{}' has no scale tensor '{}'", ckpt_->where(), t.name, scale_name);
  const bool mx = fp8_scheme_ == QuantScheme::Mxfp8;
  const int64_t b = kernels::kFp8Block;
  const std::vector<int64_t> shape = mx ? std::vector<int64_t>{rows, cols / kernels::kMxGroup}
                                        : std::vector<int64_t>{(rows + b - 1) / b, (cols + b - 1) / b};
  const TensorInfo& s = ckpt_->get(scale_name, shape, {mx ? DType::U8 : DType::F32});
  kernels::WeightView v{DType::F8_E4M3, t.data, rows, cols};
  v.quant = fp8_scheme_;
  v.scales = s.data;
  v.scale_bytes = s.nbytes;
  const kernels::WeightView p = packed(v);
  if (p.data != t.data) copied(t.name);
  if (p.scales != s.data) copied(scale_name);
  return p;
}

std::vector<float> WeightStore::vector(const std::string& name, int64_t n) {
  const TensorInfo& t = ckpt_->get(name, {n}, {DType::F32, DType::BF16, DType::F16});
  std::vector<float> out(static_cast<size_t>(n));
  kernels::to_f32(t.dtype, t.data, out.data(), n);
  copied(name);
  return out;
}

kernels::WeightView WeightStore::own(std::vector<float> data, int64_t rows, int64_t cols) {
  EAGLET_CHECK(int64_t(data.size()) == rows * cols, "internal: owned weight has the wrong size");
  owned_.push_back(std::move(data));
  return kernels::WeightView{DType::F32, owned_.back().data(), rows, cols};
}

kernels::WeightView WeightStore::quantized(const kernels::WeightView& w, kernels::QuantScheme scheme,
                                           ThreadPool& pool, const std::string& option) {
  using namespace kernels;
  EAGLET_CHECK(scheme == QuantScheme::Q8_0 || scheme == QuantScheme::Q4_0 || scheme == QuantScheme::Q4_K,
               "internal: quantized() takes Q8_0, Q4_0 or Q4_K");
  const GgmlType type = ggml_type_of(scheme);
  const int64_t block = ggml_block_weights(scheme);
  EAGLET_CHECK(w.cols % block == 0, "{}: a matrix of {} columns is not a whole number of {}-weight blocks", option,
               w.cols, block);
  EAGLET_CHECK(w.dtype == DType::F32 || w.dtype == DType::BF16,
               "{}: only F32/BF16 weights can be quantised (this matrix is {})", option, dtype_name(w.dtype));
  const int64_t row_bytes = int64_t(ggml_row_bytes(type, w.cols));
  std::vector<uint8_t> bytes(size_t(w.rows * row_bytes));
  pool.parallel_for(w.rows, [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(size_t(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      read_row(w, r, row.data());
      uint8_t* out = bytes.data() + r * row_bytes;
      switch (scheme) {
        case QuantScheme::Q8_0: quantize_row_q8_0(row.data(), reinterpret_cast<BlockQ8_0*>(out), w.cols); break;
        case QuantScheme::Q4_0: quantize_row_q4_0(row.data(), reinterpret_cast<BlockQ4_0*>(out), w.cols); break;
        default: quantize_row_q4_k(row.data(), reinterpret_cast<BlockQ4_K*>(out), w.cols); break;
      }
    }
  }, 16);
  return packed(WeightView{DType::U8, bytes.data(), w.rows, w.cols, scheme});
}

int WeightStore::quantize_in_place(const std::vector<kernels::WeightView*>& ws, kernels::QuantScheme scheme,
                                   const std::string& option, const std::string& what) {
  if (scheme == kernels::QuantScheme::None) return 0;
  ThreadPool pool(0);  // loading: every core
  const int64_t block = kernels::ggml_block_weights(scheme);
  int kept = 0;
  size_t before = 0, after = 0;
  for (kernels::WeightView* w : ws) {
    before += w->nbytes();
    if (w->cols % block == 0) *w = quantized(*w, scheme, pool, option);
    else ++kept;
    after += w->nbytes();
  }
  const char* name = kernels::ggml_type_info(uint32_t(kernels::ggml_type_of(scheme)))->name;
  spdlog::info("{}: {} of {} matrices of {} re-stored as {} ({:.1f} -> {:.1f} MB)", option, ws.size() - size_t(kept),
               ws.size(), what, name, double(before) / 1e6, double(after) / 1e6);
  if (kept) spdlog::warn("{}: {} matrices have rows that are not whole {}-weight blocks and stay as loaded", option, kept, block);
  return kept;
}

const uint8_t* WeightStore::own_bytes(AlignedBytes bytes) {
  owned_bytes_.push_back(std::move(bytes));
  return owned_bytes_.back().data();
}

}  // namespace eaglet
