// The row split the GGUF vector kernels share: rows in tiles of four (each weight load feeds four
// activation rows), then one tile of the one to three left, with the tile's height a compile-time
// constant so the kernel's loops over it unroll and its accumulators stay in registers.
#pragma once
#include <cstdint>
#include <type_traits>

namespace eaglet::kernels {

// tile(std::integral_constant<int, R>{}, m) for rows m..m+R-1, covering 0..M-1.
template <class Tile>
inline void for_row_tiles(int64_t M, Tile&& tile) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) tile(std::integral_constant<int, 4>{}, m);
  switch (M - m) {
    case 3: tile(std::integral_constant<int, 3>{}, m); break;
    case 2: tile(std::integral_constant<int, 2>{}, m); break;
    case 1: tile(std::integral_constant<int, 1>{}, m); break;
    default: break;
  }
}

}  // namespace eaglet::kernels
