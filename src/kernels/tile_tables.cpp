// The two tables whose BF16, FP8 and Q8_0 / Q4_0 matmuls run on tiles: AMX (once it passes a self-test
// against the tile model) and the tile model itself (tile_model.h), which runs on any CPU.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/fp8_pairs.h"
#include "kernels/ggml_interleave.h"
#include "kernels/isa_table.h"
#include "kernels/tile_fp8.inl"
#include "kernels/tile_ggml.inl"
#include "kernels/tile_matmul.inl"
#include "kernels/tile_model.h"

namespace eaglet::kernels {
namespace amx {
void matmul_bf16_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                       int64_t ldy);  // matmul_amx.cpp
void matmul_fp8_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, const Fp8Scales& s, int64_t n0,
                      int64_t n1, float* y, int64_t ldy, uint8_t* panel);
void matmul_q8_0(const void* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y, int64_t ldy,
                 int8_t* panel);
void matmul_q4_0(const void* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y, int64_t ldy,
                 int8_t* panel);
}  // namespace amx

namespace {

// Per-thread scratch of the INT8 kernels: Q4_0's widened panel, and the A tiles of a direct call.
template <int kSlot>
int8_t* int8_scratch(size_t need) {
  thread_local AlignedBytes scratch;
  if (scratch.size() < need) scratch.resize(need);
  return reinterpret_cast<int8_t*>(scratch.data());
}
int8_t* int8_panel(int64_t K) { return int8_scratch<0>(tiles::int8_panel_bytes(K)); }

size_t int8_act_tiles_bytes(int64_t M, int64_t K) { return tiles::int8_act_tiles_bytes(M, K); }
void prepare_int8_act_tiles(const ActBlockQ8* x, int64_t M, int64_t K, void* out) {
  tiles::copy_act_tiles(x, M, K / 32, static_cast<tiles::ActTile*>(out));
}
// The A tiles of a direct call (not through dispatch, which prepares them once per matmul).
const void* own_act_tiles(const ActBlockQ8* x, int64_t M, int64_t K) {
  int8_t* act = int8_scratch<1>(int8_act_tiles_bytes(M, K));
  prepare_int8_act_tiles(x, M, K, act);
  return act;
}

// Scratch for the FP8 kernels' decoded panel of two weight blocks (more than 32 rows), per thread.
uint8_t* fp8_panel(int64_t K) {
  thread_local std::vector<uint8_t> panel;
  const size_t need = size_t(2 * (K / kPairK)) * size_t(kFp8TileBytes) * sizeof(bf16_t);
  if (panel.size() < need) panel.resize(need);
  return panel.data();
}

void amx_fp8(const bf16_t* x, int64_t M, int64_t K, const void* w, const Fp8Scales& s, int64_t n0, int64_t n1,
             float* y, int64_t ldy) {
  amx::matmul_fp8_pairs(x, M, K, w, s, n0, n1, y, ldy, M > 2 * kPairRows ? fp8_panel(K) : nullptr);
}

void fp8_model(const bf16_t* x, int64_t M, int64_t K, const void* w, const Fp8Scales& s, int64_t n0, int64_t n1,
               float* y, int64_t ldy) {
  TileModel t;
  tiles::matmul_fp8_pairs(t, x, M, K, w, s.data, s.scheme, n0, n1, y, ldy, M > 2 * kPairRows ? fp8_panel(K) : nullptr);
}

using MatmulInt8Fn = void (*)(const void* act, int64_t, int64_t, const void*, int64_t, int64_t, float*, int64_t,
                              int8_t* panel);

// Below kMinRows rows the VNNI kernel is faster than tiles (same bits either way): every 32-weight
// block needs a fresh C tile, stored and scaled by the vector unit, and Q4_0 also widens its
// nibbles first. Measured with eaglet_bench_kernels' run_ggml (5632 x 2048, 2 threads, Intel Xeon
// AMX VM, activation tiles and next-group prefetch in place): Q8_0's VNNI kernel wins up to M = 4
// (441 against 517 us) and tiles from 8 (534 against 595); Q4_0 ties at 12 (565 / 542 us) and
// tiles win at 16 (553 against 673).
constexpr int64_t kAmxMinRowsQ8_0 = 8, kAmxMinRowsQ4_0 = 16;

template <MatmulInt8Fn kTiles>
void amx_int8_tiles(const void* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                    int64_t ldy) {
  kTiles(act, M, K, w, n0, n1, y, ldy, int8_panel(K));
}

template <MatmulInt8Fn kTiles, MatmulGgmlFn kVnni, int64_t kMinRows>
void amx_int8(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
              int64_t ldy) {
  if (M < kMinRows) return kVnni(x, M, K, w, n0, n1, y, ldy);
  amx_int8_tiles<kTiles>(own_act_tiles(x, M, K), M, K, w, n0, n1, y, ldy);
}

// The AMX kernel for one block type: VNNI below kMinRows, tiles on A tiles dispatch prepares from there.
template <MatmulInt8Fn kTiles, MatmulGgmlFn kVnni, int64_t kMinRows>
GgmlKernel amx_int8_kernel() {
  return {amx_int8<kTiles, kVnni, kMinRows>, Layout::Rows16, "amx-int8",
          {kMinRows, int8_act_tiles_bytes, prepare_int8_act_tiles, amx_int8_tiles<kTiles>}};
}

// One row (the decode step) runs the AVX-512 kernel in the tiles' order (the same bits), which
// streams the weights faster than a pass of 1-row tiles. eaglet_bench_kernels run_model_shape at
// M = 1, 2 threads, Intel Xeon AMX VM, tiles -> vector loop: 2560 x 2048 387 -> 359 us, 2048 x
// 2048 289 -> 273, 5632 x 2048 757 -> 726, 2048 x 5632 774 -> 740. From 2 rows the tiles win
// (5632 x 2048: M = 2 748 against 770 us, M = 4 767 against 1179): the loop does twice the dot
// products of the plain AVX-512 kernel, and a 512-bit core has two vector ports for them.
constexpr int64_t kVectorRowsBf16 = 1;

void amx_bf16(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  if (M <= kVectorRowsBf16) return avx512::matmul_bf16_pairs_tile_order(x, M, K, w, n0, n1, y, ldy);
  amx::matmul_bf16_pairs(x, M, K, w, n0, n1, y, ldy);
}

template <class Q>
void int8_model_tiles(const void* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                      int64_t ldy) {
  TileModel t;
  tiles::matmul_int8<TileModel, Q>(t, static_cast<const tiles::ActTile*>(act), M, K, w, n0, n1, y, ldy, int8_panel(K));
}

template <class Q>
void int8_model(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                int64_t ldy) {
  int8_model_tiles<Q>(own_act_tiles(x, M, K), M, K, w, n0, n1, y, ldy);
}

template <class Q>
GgmlKernel int8_model_kernel() {
  return {int8_model<Q>, Layout::Rows16, "amx-int8-model",
          {1, int8_act_tiles_bytes, prepare_int8_act_tiles, int8_model_tiles<Q>}};
}

void matmul_bf16_pairs_model(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                             int64_t ldy) {
  TileModel t;
  tiles::matmul_bf16_pairs(t, x, M, K, w, n0, n1, y, ldy);
}

// A BF16 matmul with padding in every direction (M = 37, K = 90, N = 40) for the self-tests.
struct Bf16TestProblem {
  static constexpr int64_t M = 37, K = 90, N = 40;
  AlignedBytes packed;
  std::vector<bf16_t> xb = std::vector<bf16_t>(bf16_pairs_activation_count(M, K));
  std::vector<float> want = std::vector<float>(size_t(M * N));  // the tile model's

  Bf16TestProblem() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(size_t(M * K));
    std::vector<bf16_t> w(size_t(N * K));
    for (float& v : x) v = u(rng);
    for (bf16_t& v : w) v = f32_to_bf16(u(rng));
    packed = pack_bf16_pairs(w.data(), N, K);
    bf16_pairs_activations(x.data(), M, K, xb.data());
    matmul_bf16_pairs_model(xb.data(), M, K, packed.data(), 0, N, want.data(), N);
  }
  // The first `rows` rows of the product by f.
  std::vector<float> run(MatmulBf16PairsFn f, int64_t rows) const {
    std::vector<float> got(size_t(rows * N), NAN);
    f(xb.data(), rows, K, packed.data(), 0, N, got.data(), N);
    return got;
  }
  // The first of `got`'s outputs further from the model's than `tol` (relative; 0: not its bits),
  // as a message; empty when there is none.
  std::string check(const std::vector<float>& got, float tol, const char* what) const {
    for (size_t i = 0; i < got.size(); ++i)
      if (tol == 0 ? std::memcmp(&got[i], &want[i], sizeof(float)) != 0
                   : !(std::fabs(got[i] - want[i]) <= tol * (1.0f + std::fabs(want[i]))))
        return fmt::format("its {} gave {} for y[{}, {}] where the tile model gives {}", what, got[i], i / size_t(N),
                           i % size_t(N), want[i]);
    return "";
  }
};

// The AMX kernel against the tile model: a wrong tile configuration or layout gives errors of the
// values' size, a CPU that rounds otherwise a few ulps (AMX stays on; *exact turns false).
bool amx_self_test(std::string* why, bool* exact) {
  const Bf16TestProblem p;
  const std::vector<float> got = p.run(amx::matmul_bf16_pairs, p.M);
  *why = p.check(got, 1e-4f, "self-test");
  if (!why->empty()) return false;
  *exact = p.check(got, 0, "self-test").empty();
  return true;
}

// Whether the AVX-512 kernel in the tiles' order gives the model's bits for every row count it
// takes (it relies on vdpbf16ps's documented rounding).
std::string vector_tile_order_test() {
  const Bf16TestProblem p;
  for (int64_t rows = 1; rows <= kVectorRowsBf16; ++rows) {
    std::string why = p.check(p.run(avx512::matmul_bf16_pairs_tile_order, rows), 0, "AVX-512 tile-order kernel");
    if (!why.empty()) return why;
  }
  return "";
}

// The AMX INT8 kernels against the tile model, bitwise (exact block sums, the same float
// operations), on Q4_0 and Q8_0 with 37 rows (two passes of 16 and a partial one), three blocks
// (the odd one out of the two in flight) and 40 columns (a partial tile).
bool amx_int8_self_test(std::string* why) {
  const int64_t M = 37, K = 96, N = 40;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(M * K)), wf(size_t(N * K));
  for (float& v : x) v = nd(rng);
  for (float& v : wf) v = nd(rng);
  std::vector<ActBlockQ8> xq(size_t((M + 15) / 16 * 16 * K / 32));
  quantize_activations(x.data(), M, K, xq.data());
  std::vector<BlockQ8_0> w8(size_t(N * K / 32));
  std::vector<BlockQ4_0> w4(w8.size());
  quantize_row_q8_0(wf.data(), w8.data(), N * K);
  quantize_row_q4_0(wf.data(), w4.data(), N * K);
  const AlignedBytes p8 = interleave_rows(GgmlType::Q8_0, w8.data(), N, K, kRowGroup16);
  const AlignedBytes p4 = interleave_rows(GgmlType::Q4_0, w4.data(), N, K, kRowGroup16);
  const auto differs = [&](const char* type, MatmulGgmlFn model, MatmulInt8Fn real, const void* w) {
    std::vector<float> got(size_t(M * N), NAN), want(size_t(M * N));
    real(own_act_tiles(xq.data(), M, K), M, K, w, 0, N, got.data(), N, int8_panel(K));
    model(xq.data(), M, K, w, 0, N, want.data(), N);
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
        *why = std::string("its ") + type + " self-test gave " + std::to_string(got[i]) + " for y[" +
               std::to_string(i / size_t(N)) + ", " + std::to_string(i % size_t(N)) + "] where the tile model gives " +
               std::to_string(want[i]);
        return true;
      }
    return false;
  };
  return !differs("Q8_0", int8_model<tiles::Q8Tiles>, amx::matmul_q8_0, p8.data()) &&
         !differs("Q4_0", int8_model<tiles::Q4Tiles>, amx::matmul_q4_0, p4.data());
}

// The AMX FP8 kernel against the tile model: the decoded tiles must be the model's bit for bit,
// so the test takes scales in every decoder path (MXFP8 codes 0..9 and 247..255, 255 = NaN, a NaN
// code, tiles of normal codes only with scales 10..246, FP8 block scales from 2^-140 up to
// 2^125) and compares outputs within the products' rounding (37 rows: the panel path; 40
// columns: a partial block).
bool amx_fp8_self_test(std::string* why) {
  const int64_t M = 37, K = 384, N = 40;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(size_t(M * K));
  for (float& v : x) v = u(rng);
  std::vector<bf16_t> xb(bf16_pairs_activation_count(M, K));
  bf16_pairs_activations(x.data(), M, K, xb.data());
  std::vector<uint8_t> codes(size_t(N * K)), e8m0(size_t(N * K / kMxGroup));
  for (size_t i = 0; i < codes.size(); ++i) {  // rows 16..31: normal codes only (the lookup-free path)
    codes[i] = uint8_t(rng());
    if (i / K / kPairRows == 1 && !e4m3_is_normal(codes[i])) codes[i] = uint8_t(0x38 | (codes[i] & 0x80));
  }
  for (size_t i = 0; i < e8m0.size(); ++i) e8m0[i] = uint8_t(i < 9 ? 247 + i : i < 19 ? i - 9 : 100 + rng() % 40);
  for (size_t i = 0; i < 4; ++i) e8m0[K / kMxGroup * 16 + i] = uint8_t(i % 2 ? 246 - i / 2 : 10 + i / 2);
  std::vector<float> block = {0x1p-140f, 3.0f, 0x1p125f};
  for (QuantScheme q : {QuantScheme::Mxfp8, QuantScheme::Fp8Block128}) {
    const void* scales = q == QuantScheme::Mxfp8 ? static_cast<const void*>(e8m0.data()) : block.data();
    const AlignedBytes packed = pack_fp8_pairs(codes.data(), scales, q, N, K);
    const Fp8Scales s{q, packed.data() + fp8_pairs_code_bytes(N, K), K};
    alignas(64) uint8_t got[2 * kFp8TileBytes], want[2 * kFp8TileBytes];
    for (int64_t rb = 0; rb < N / kPairRows; ++rb)
      for (int64_t g = 0; g < K / kPairK; ++g) {
        const uint8_t* c = packed.data() + fp8_pairs_tile_offset(K, rb, g);
        const Fp8TileScales ts = fp8_pairs_tile_scales(q, s.data, K, rb, g);
        avx512::decode_fp8_tile_vbmi(c, ts, got);
        TileModel::decode_fp8(c, ts, want);
        if (std::memcmp(got, want, sizeof(got)) != 0) {
          *why = "its FP8 decoder differs from the tile model's on tile (" + std::to_string(rb) + ", " +
                 std::to_string(g) + ")";
          return false;
        }
      }
    std::vector<float> y(size_t(M * N), NAN), ref(size_t(M * N));
    amx_fp8(xb.data(), M, K, packed.data(), s, 0, N, y.data(), N);
    fp8_model(xb.data(), M, K, packed.data(), s, 0, N, ref.data(), N);
    for (size_t i = 0; i < y.size(); ++i)
      if (!(std::fabs(y[i] - ref[i]) <= 1e-4f * (1.0f + std::fabs(ref[i]))) && !(std::isnan(y[i]) && std::isnan(ref[i])) &&
          y[i] != ref[i]) {
        *why = "its FP8 self-test gave " + std::to_string(y[i]) + " for y[" + std::to_string(i / size_t(N)) + ", " +
               std::to_string(i % size_t(N)) + "] where the tile model gives " + std::to_string(ref[i]);
        return false;
      }
  }
  return true;
}

}  // namespace

const IsaTable& amx_table() {
  static const IsaTable t = [] {
    IsaTable t = avx512bf16_table();
    std::string why;
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.amx_bf16 || !f.avx512_bf16) why = "this CPU has no AMX-BF16";
    else if (bool exact = false; request_amx(&why) && amx_self_test(&why, &exact)) {
      t.isa = Isa::Amx;
      t.name = "amx";
      t.bf16_layout = Layout::Bf16Pairs16;
      t.matmul_bf16_pairs = amx::matmul_bf16_pairs;
      const std::string vector_why =
          exact ? vector_tile_order_test() : "the tiles round otherwise than the tile model (within 1e-4)";
      if (vector_why.empty()) {
        t.matmul_bf16_pairs = amx_bf16;
        t.bf16_pairs_name = "amx (1 row: avx512bf16 in tile order)";
      } else {
        spdlog::warn("BF16 decode runs on AMX tiles, not the faster vector loop: {}", vector_why);
      }
      if (!f.avx512_vbmi) {
        spdlog::warn("AMX FP8 kernel off: this CPU has no AVX-512 VBMI; FP8 weights run the AVX-512 kernel");
      } else if (amx_fp8_self_test(&why)) {
        t.fp8_layout = Layout::Fp8Pairs16;
        t.matmul_fp8_pairs = amx_fp8;
      } else {  // the vector pairs kernel shares the decoder that may have failed: row-major FP8
        t.fp8_layout = Layout::RowMajor;
        t.matmul_fp8_pairs = scalar_table().matmul_fp8_pairs;
        spdlog::warn("AMX FP8 kernel off: {}; FP8 weights run the AVX-512 row-major kernel", why);
      }
      std::string int8_why;
      if (!f.amx_int8 || !f.avx512_vnni) int8_why = "this CPU has no AMX-INT8 and AVX-512 VNNI";
      else if (amx_int8_self_test(&int8_why)) {
        t.q8_0 = amx_int8_kernel<amx::matmul_q8_0, vnni::matmul_q8_0, kAmxMinRowsQ8_0>();
        t.q4_0 = amx_int8_kernel<amx::matmul_q4_0, vnni::matmul_q4_0, kAmxMinRowsQ4_0>();
      }
      if (!int8_why.empty())
        spdlog::warn("AMX INT8 kernels off: {}; GGUF blocks run the {} kernels", int8_why, t.q8_0.name);
      return t;
    }
    spdlog::warn("AMX kernels off: {}; running the {} kernels", why, t.name);
    return t;
  }();
  return t;
}

const IsaTable& tile_model_table() {
  static const IsaTable t = [] {
    const Isa best = best_supported_isa();
    IsaTable t = table_for(best == Isa::Amx ? Isa::Avx512Bf16 : best);
    t.name = "amx-model";
    t.bf16_layout = Layout::Bf16Pairs16;
    t.matmul_bf16_pairs = matmul_bf16_pairs_model;
    t.fp8_layout = Layout::Fp8Pairs16;
    t.matmul_fp8_pairs = fp8_model;
    t.q8_0 = int8_model_kernel<tiles::Q8Tiles>();
    t.q4_0 = int8_model_kernel<tiles::Q4Tiles>();
    return t;
  }();
  return t;
}

}  // namespace eaglet::kernels
