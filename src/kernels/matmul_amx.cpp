// The AMX BF16 kernel: tile_matmul.inl over the real tile instructions. Only the kernel lives
// here (compiled for AMX): the table and its self-test are baseline code (tile_tables.cpp), so no
// library function instantiated with these flags can be picked for code that runs elsewhere.
#include <immintrin.h>

#include "kernels/tile_matmul.inl"

namespace eaglet::kernels::amx {
namespace {

// LDTILECFG's 64-byte operand (palette 1): bytes per row and rows of each tile.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// GCC's tile intrinsics paste the tile number into the instruction text, so it must be a literal,
// not a template argument: each operation picks its literal by constexpr dispatch.
#define EAGLET_TILE_SWITCH(T, CALL)              \
  if constexpr (T == 0) CALL(0);                 \
  else if constexpr (T == 1) CALL(1);            \
  else if constexpr (T == 2) CALL(2);            \
  else if constexpr (T == 3) CALL(3);            \
  else if constexpr (T == 4) CALL(4);            \
  else if constexpr (T == 5) CALL(5);            \
  else if constexpr (T == 6) CALL(6);            \
  else CALL(7)

// Every tile 64 bytes wide, with the rows the kernel asks for. Configured per call and released
// after, so a thread that stops using tiles leaves the OS no 8 KB of tile state to save at every
// switch.
struct Tiles {
  static constexpr int kRowBytes = 64;
  void configure(const TileShape& s) {
    TileConfig cfg;
    for (int i = 0; i < 8; ++i) {
      cfg.colsb[i] = kRowBytes;
      cfg.rows[i] = s.rows[i];
    }
    _tile_loadconfig(&cfg);
  }
  void release() { _tile_release(); }
  template <int T>
  void zero() {
#define EAGLET_ZERO(t) _tile_zero(t)
    EAGLET_TILE_SWITCH(T, EAGLET_ZERO);
#undef EAGLET_ZERO
  }
  template <int T>
  void load(const void* p, size_t stride) {
#define EAGLET_LOAD(t) _tile_loadd(t, p, long(stride))
    EAGLET_TILE_SWITCH(T, EAGLET_LOAD);
#undef EAGLET_LOAD
  }
  template <int T>
  void store(void* p, size_t stride) {
#define EAGLET_STORE(t) _tile_stored(t, p, long(stride))
    EAGLET_TILE_SWITCH(T, EAGLET_STORE);
#undef EAGLET_STORE
  }
  // The products tile_matmul.inl issues (C, A, B).
  template <int C, int A, int B>
  void dpbf16ps() {
    constexpr int key = C * 100 + A * 10 + B;
    if constexpr (key == 46) _tile_dpbf16ps(0, 4, 6);
    else if constexpr (key == 147) _tile_dpbf16ps(1, 4, 7);
    else if constexpr (key == 245) _tile_dpbf16ps(2, 4, 5);
    else if constexpr (key == 346) _tile_dpbf16ps(3, 4, 6);
    else if constexpr (key == 256) _tile_dpbf16ps(2, 5, 6);
    else if constexpr (key == 357) _tile_dpbf16ps(3, 5, 7);
    else static_assert(key == 46, "a tile product tile_matmul.inl does not issue");
  }
};
#undef EAGLET_TILE_SWITCH

}  // namespace

void matmul_bf16_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                       int64_t ldy) {
  Tiles t;
  tiles::matmul_bf16_pairs(t, x, M, K, w, n0, n1, y, ldy);
}

}  // namespace eaglet::kernels::amx
