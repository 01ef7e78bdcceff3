// Weights in the layout the kernels read. The kernel layer owns layouts: a model loads a matrix
// as the checkpoint has it (Layout::RowMajor) and asks pack() for the one the active kernels
// want, so a new ISA with a new layout changes no model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/aligned_bytes.h"
#include "kernels/ops.h"

namespace eaglet::kernels {

struct IsaTable;

struct PackedWeight {
  WeightView view;             // points into `bytes` when packing copied (moving `bytes` keeps it valid)
  AlignedBytes bytes;  // empty when the kernels read the matrix where it lies
};

// GGUF blocks: rows interleaved as t's kernel for the type reads them (8 or 16). BF16 and FP8:
// the table's bf16_layout / fp8_layout (AMX: pairs).
// Anything else, or a matrix already packed, as given.
PackedWeight pack(const WeightView& w, const IsaTable& t);
PackedWeight pack(const WeightView& w);  // for the active table

// Row r of w in F32 whatever its type and layout (embedding lookups, --quantize, the trainer's
// copies of the target's embedding and lm_head). Interleaved GGUF rows only for Q8_0 / Q4_0.
void read_row(const WeightView& w, int64_t r, float* out);

// The kernel a matmul by w runs on t, for reports: "amx bf16", "avx2 bf16>f32", "amx-int8 q4_0".
std::string kernel_name(const WeightView& w, const IsaTable& t);

}  // namespace eaglet::kernels
