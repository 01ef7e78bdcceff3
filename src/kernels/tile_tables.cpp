// The two tables whose BF16 matmuls run on tiles: AMX (once it passes a self-test against the tile
// model) and the tile model itself (tile_model.h), which runs on any CPU.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "kernels/isa_table.h"
#include "kernels/tile_matmul.inl"
#include "kernels/tile_model.h"

namespace eaglet::kernels {
namespace amx {
void matmul_bf16_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                       int64_t ldy);  // matmul_amx.cpp
}  // namespace amx

namespace {

void matmul_bf16_pairs_model(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                             int64_t ldy) {
  TileModel t;
  tiles::matmul_bf16_pairs(t, x, M, K, w, n0, n1, y, ldy);
}

// The AMX kernel against the tile model on a matmul with padding in every direction (M = 37,
// K = 90, N = 40): a wrong tile configuration or layout gives errors of the values' size, the
// products' rounding a few ulps.
bool amx_self_test(std::string* why) {
  const int64_t M = 37, K = 90, N = 40;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(size_t(M * K));
  std::vector<bf16_t> w(size_t(N * K));
  for (float& v : x) v = u(rng);
  for (bf16_t& v : w) v = f32_to_bf16(u(rng));
  const std::vector<uint8_t> packed = pack_bf16_pairs(w.data(), N, K);
  std::vector<bf16_t> xb(bf16_pairs_activation_count(M, K));
  bf16_pairs_activations(x.data(), M, K, xb.data());
  std::vector<float> got(size_t(M * N), NAN), want(size_t(M * N));
  amx::matmul_bf16_pairs(xb.data(), M, K, packed.data(), 0, N, got.data(), N);
  matmul_bf16_pairs_model(xb.data(), M, K, packed.data(), 0, N, want.data(), N);
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i])))) {
      *why = "its self-test gave " + std::to_string(got[i]) + " for y[" + std::to_string(i / size_t(N)) + ", " +
             std::to_string(i % size_t(N)) + "] where the tile model gives " + std::to_string(want[i]);
      return false;
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
    else if (request_amx(&why) && amx_self_test(&why)) {
      t.isa = Isa::Amx;
      t.name = "amx";
      t.bf16_layout = Layout::Bf16Pairs16;
      t.matmul_bf16_pairs = amx::matmul_bf16_pairs;
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
    return t;
  }();
  return t;
}

}  // namespace eaglet::kernels
