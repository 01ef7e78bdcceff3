#include "kernels/pack.h"

#include "core/error.h"
#include "kernels/bf16_pairs.h"
#include "kernels/fp8_pairs.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"

namespace eaglet::kernels {

size_t WeightView::nbytes() const {
  if (is_ggml_blocks(quant))
    return layout == Layout::RowMajor ? size_t(rows) * ggml_row_bytes(ggml_type_of(quant), cols)
                                      : size_t(ggml_matrix_bytes(quant, rows, cols, row_group(layout)));
  if (layout == Layout::Bf16Pairs16) return bf16_pairs_bytes(rows, cols);
  if (layout == Layout::Fp8Pairs16) return fp8_pairs_code_bytes(rows, cols) + scale_bytes;
  return size_t(rows) * size_t(cols) * dtype_size(dtype) + scale_bytes;
}

PackedWeight pack(const WeightView& w, const IsaTable& t) {
  PackedWeight p{w, {}};
  if (w.layout != Layout::RowMajor) return p;
  if (is_ggml_blocks(w.quant)) {
    const Layout layout = t.ggml(w.quant).layout;
    p.bytes = interleave_rows(ggml_type_of(w.quant), w.data, w.rows, w.cols, row_group(layout));
    p.view.layout = layout;
  } else if (w.dtype == DType::BF16 && t.bf16_layout == Layout::Bf16Pairs16) {
    p.bytes = pack_bf16_pairs(static_cast<const bf16_t*>(w.data), w.rows, w.cols);
    p.view.layout = Layout::Bf16Pairs16;
  } else if (w.dtype == DType::F8_E4M3 && t.fp8_layout == Layout::Fp8Pairs16) {
    p.bytes = pack_fp8_pairs(static_cast<const uint8_t*>(w.data), w.scales, w.quant, w.rows, w.cols);
    p.view.layout = Layout::Fp8Pairs16;
    p.view.scales = p.bytes.data() + fp8_pairs_code_bytes(w.rows, w.cols);
    p.view.scale_bytes = p.bytes.size() - fp8_pairs_code_bytes(w.rows, w.cols);
  } else {
    return p;
  }
  p.view.data = p.bytes.data();
  return p;
}

PackedWeight pack(const WeightView& w) { return pack(w, active_table()); }

void read_row(const WeightView& w, int64_t r, float* out) {
  EAGLET_CHECK(r >= 0 && r < w.rows, "internal: row {} of a matrix of {} rows", r, w.rows);
  const int64_t K = w.cols;
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  if (is_ggml_blocks(w.quant)) {
    const GgmlType type = ggml_type_of(w.quant);
    if (w.layout == Layout::RowMajor) return dequantize_row(type, bytes + size_t(r) * ggml_row_bytes(type, K), out, K);
    std::vector<uint8_t> row(ggml_row_bytes(type, K));
    deinterleave_row(type, w.data, K, r, row.data(), row_group(w.layout));
    return dequantize_row(type, row.data(), out, K);
  }
  switch (w.dtype) {
    case DType::F8_E4M3: {
      if (w.layout == Layout::Fp8Pairs16) {
        for (int64_t k = 0; k < K; ++k)
          out[k] = e4m3_to_f32(bytes[fp8_pairs_index(K, r, k)]) * fp8_pairs_scale(w.quant, w.scales, K, r, k);
        return;
      }
      const Fp8Scales s = w.fp8_scales();
      for (int64_t k = 0; k < K; ++k) out[k] = e4m3_to_f32(bytes[r * K + k]) * s.scale(r, k);
      return;
    }
    case DType::BF16:
      if (w.layout == Layout::Bf16Pairs16) {
        const auto* p = static_cast<const bf16_t*>(w.data);
        for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_f32(p[bf16_pairs_index(K, r, k)]);
        return;
      }
      [[fallthrough]];
    default: to_f32(w.dtype, bytes + size_t(r) * size_t(K) * dtype_size(w.dtype), out, K);
  }
}

std::string kernel_name(const WeightView& w, const IsaTable& t) {
  const std::string isa = t.name;
  if (is_ggml_blocks(w.quant))
    return std::string(t.ggml(w.quant).name) + " " + ggml_type_info(uint32_t(ggml_type_of(w.quant)))->name;
  switch (w.dtype) {
    case DType::F8_E4M3: {
      // Pairs on a table without a pairs kernel (the ISA switched after loading) run the scalar
      // one; row-major weights run a kernel of F32 activations (">f32", as for BF16).
      const bool pairs = w.layout == Layout::Fp8Pairs16, scalar = pairs && t.fp8_layout != w.layout;
      return (scalar ? std::string("scalar") : isa) + (w.quant == QuantScheme::Mxfp8 ? " mxfp8" : " fp8-block") +
             (pairs ? "" : ">f32");
    }
    case DType::BF16:
      // Pairs on a table without a pairs kernel (the ISA switched after loading) run the scalar one.
      if (w.layout == Layout::Bf16Pairs16) {
        if (t.bf16_layout != w.layout) return "scalar bf16";
        return (t.bf16_pairs_name ? t.bf16_pairs_name : isa) + " bf16";
      }
      return isa + (t.matmul_bf16_bf16 ? " bf16" : " bf16>f32");
    default: return isa + " " + dtype_name(w.dtype);
  }
}

}  // namespace eaglet::kernels
