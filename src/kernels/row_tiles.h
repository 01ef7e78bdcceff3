// The row split the GGUF vector kernels share: ceil(M / MaxR) tiles as even as M allows (each
// weight load feeds every row of a tile; M = 5 in tiles of four runs 3 + 2, not 4 + 1, so no tile
// is left with too few independent sums to hide the multiply-add latency), with each tile's height
// a compile-time constant so the kernel's loops over it unroll and its accumulators stay in
// registers.
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>

namespace eaglet::kernels {

// tile(std::integral_constant<int, R>{}, m) for rows m..m+R-1, covering 0..M-1, R <= MaxR.
template <int MaxR = 4, class Tile>
inline void for_row_tiles(int64_t M, Tile&& tile) {
  const int64_t tiles = (M + MaxR - 1) / MaxR;
  for (int64_t i = 0, m = 0; i < tiles; ++i) {
    const int64_t rows = M / tiles + (i < M % tiles);
    [&]<int... R>(std::integer_sequence<int, R...>) {
      ((rows == R + 1 ? tile(std::integral_constant<int, R + 1>{}, m) : void()), ...);
    }(std::make_integer_sequence<int, MaxR>{});
    m += rows;
  }
}

}  // namespace eaglet::kernels
