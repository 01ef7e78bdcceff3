// The per-ISA function table behind ops.h. Each table is the one below it with the entries its ISA
// does better overridden (scalar -> avx2 -> avx512 -> avx512bf16 -> amx), so every entry always
// has a kernel; dispatch.cpp picks one.
#pragma once
#include <cstdint>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/bf16_pairs.h"
#include "kernels/layout.h"
#include "kernels/quant.h"

namespace eaglet::kernels {

// Computes y[m, n] for m < M, n0 <= n < n1; y has row stride ldy.
using MatmulF32Fn = void (*)(const float* x, int64_t M, int64_t K, const float* w, int64_t n0,
                             int64_t n1, float* y, int64_t ldy);
using MatmulBf16Fn = void (*)(const float* x, int64_t M, int64_t K, const bf16_t* w, int64_t n0,
                              int64_t n1, float* y, int64_t ldy);
// Both operands BF16 (x rounded once per call), products accumulated in F32.
using MatmulBf16xBf16Fn = void (*)(const bf16_t* x, int64_t M, int64_t K, const bf16_t* w,
                                   int64_t n0, int64_t n1, float* y, int64_t ldy);

// e4m3 weights with per-block scales (see quant.h); K is a multiple of kMxGroup.
using MatmulFp8Fn = void (*)(const float* x, int64_t M, int64_t K, const uint8_t* w,
                             const Fp8Scales& scales, int64_t n0, int64_t n1, float* y, int64_t ldy);

// GGUF block weights (`w`: N rows of blocks, interleaved in groups of 8 rows, ggml_interleave.h)
// against activations quantised per 32 (kernels/ggml_quant.h): integer dot products per block,
// scaled and summed in F32. n0 must be a multiple of 8; K of the block size (32 or 256).
struct ActBlockQ8;
// BF16 activations, round_up(M, 16) padded rows (bf16_pairs_activations) against weights in
// the BF16 pairs layout (bf16_pairs.h); n0 a multiple of 16.
using MatmulBf16PairsFn = void (*)(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
                                   float* y, int64_t ldy);
// FP8 weights in their pairs layout (fp8_pairs.h; `s.data` the packed scales) against BF16
// activations laid out as for matmul_bf16_pairs; n0 a multiple of 16.
using MatmulFp8PairsFn = void (*)(const bf16_t* x, int64_t M, int64_t K, const void* w, const Fp8Scales& s,
                                  int64_t n0, int64_t n1, float* y, int64_t ldy);
using MatmulGgmlFn = void (*)(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
                              float* y, int64_t ldy);
// Kernels that read the activation blocks rearranged (the AMX A tiles): from `min_rows` rows,
// dispatch lays them out once per matmul with `prepare` (into `bytes(M, K)` bytes, 64-byte
// aligned; x padded to a multiple of 16 rows) and every column range's call reads them through
// `fn`, where the kernel would otherwise copy them again per call and thread.
struct GgmlActTiles {
  int64_t min_rows = 0;
  size_t (*bytes)(int64_t M, int64_t K) = nullptr;
  void (*prepare)(const ActBlockQ8* x, int64_t M, int64_t K, void* out) = nullptr;
  void (*fn)(const void* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
             int64_t ldy) = nullptr;
};

// One GGUF block type's kernel in a table: the row interleave pack() makes for it, and its name
// in reports. Every kernel gives the scalar reference's bits, whatever its layout; `fn` takes any
// M (it rearranges the activations itself where `act_tiles` would).
struct GgmlKernel {
  MatmulGgmlFn fn = nullptr;
  Layout layout = Layout::Rows8;
  const char* name = "";  // "scalar", "avx2", "avx512-vnni", "amx-int8", "amx-int8-model"
  GgmlActTiles act_tiles = {};
};

struct IsaTable {
  Isa isa;
  const char* name;     // the kernels' name in reports: "avx2", "amx", "amx-model" (tile_model.h)
  Layout bf16_layout;   // how pack() lays out BF16 weights for these kernels
  MatmulF32Fn matmul_f32;
  MatmulBf16Fn matmul_bf16;               // F32 activations, weights widened to F32
  MatmulBf16xBf16Fn matmul_bf16_bf16;     // null unless the ISA has BF16 dot products
  float (*dot)(const float*, const float*, int64_t);
  void (*axpy)(float, const float*, float*, int64_t);
  void (*rmsnorm)(const float*, const float*, float, float*, int64_t);
  void (*silu_mul)(const float*, const float*, float*, int64_t);
  MatmulFp8Fn matmul_fp8;
  // Attention over one head's cached rows (row i at rows + i * stride): scores and the weighted
  // sum of values, each row in order, so results equal per-row dot / axpy calls bitwise.
  void (*dot_rows)(const float* q, const float* rows, int64_t stride, int64_t n, int64_t dim, float scale,
                   float* out);
  void (*axpy_rows)(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out);
  GgmlKernel q8_0, q4_0, q4_k, q6_k;
  // x [M, K] to the activation blocks the GGUF kernels read (every ISA gives the same codes).
  void (*quantize_act)(const float* x, int64_t M, int64_t K, ActBlockQ8* out);
  MatmulBf16PairsFn matmul_bf16_pairs;
  const char* bf16_pairs_name = nullptr;  // its name in reports where not `name` (AMX's decode rows)
  void (*softmax)(float* x, int64_t n);  // in place
  ToBf16Fn to_bf16;                      // f32_to_bf16's bits on every ISA
  Layout fp8_layout = Layout::RowMajor;  // how pack() lays out FP8 weights (AVX-512 BF16 + VBMI, AMX: FP8 pairs)
  MatmulFp8PairsFn matmul_fp8_pairs;     // every table reads the layout; AMX on tiles, AVX-512 BF16 on vectors

  const GgmlKernel& ggml(QuantScheme q) const;  // q8_0 .. q6_k; throws for other schemes
};

// The AVX2 GGUF-block matmuls, which the AVX-512 tables share (kernels/matmul_ggml_avx2.cpp).
namespace avx2 {
void matmul_q8_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy);
void matmul_q4_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy);
void matmul_q4_k(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy);
void matmul_q6_k(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy);
void quantize_activations(const float* x, int64_t M, int64_t K, ActBlockQ8* out);
}  // namespace avx2

// Q8_0 and Q4_0 on rows interleaved by 16 with AVX-512 VNNI (kernels/matmul_ggml_avx512.cpp):
// the AVX-512 tables' kernels where the CPU has VNNI, and the AMX tables' kernel for M = 1.
namespace vnni {
void matmul_q8_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy);
void matmul_q4_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy);
}  // namespace vnni

// The BF16 pairs matmul on AVX-512 BF16 adding in the AMX tiles' order (tile_model.h), for up to
// 4 rows: the AMX table's decode step (kernels/pairs_avx512.cpp).
namespace avx512 {
void matmul_bf16_pairs_tile_order(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1,
                                  float* y, int64_t ldy);
}  // namespace avx512

const IsaTable& scalar_table();
const IsaTable& avx2_table();
const IsaTable& avx512_table();
const IsaTable& avx512bf16_table();
// AMX tiles for BF16 pairs, on top of avx512bf16. Built once: it asks the kernel for tile state
// and checks the AMX kernel against the tile model on a small matmul; when either fails it logs
// why and is the avx512bf16 table (its `name` says which ran). Where the tiles give the model's
// bits, one-row matmuls run matmul_bf16_pairs_tile_order instead (`bf16_pairs_name` says so).
const IsaTable& amx_table();
// The portable model of the AMX tiles (tile_model.h) on top of the best vector table: slow, runs
// anywhere, and reads the same packed weights, so the AMX path's logic is tested on every machine.
const IsaTable& tile_model_table();

// The table for `isa` (for tests that compare paths), and the active one.
const IsaTable& table_for(Isa isa);
const IsaTable& active_table();
// Tests: run every op on `t` (null: back to the active ISA's table). Weights must be packed after
// the switch (pack() reads the table too).
void set_table_override(const IsaTable* t);

}  // namespace eaglet::kernels
