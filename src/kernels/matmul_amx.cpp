// The AMX kernels: tile_matmul.inl (BF16), tile_fp8.inl (FP8 decoded onto BF16 tiles) and
// tile_ggml.inl (Q8_0 / Q4_0 on INT8 tiles) over the real tile instructions, with AVX-512 for the
// INT8 kernel's vector steps (FP8 tiles decode in fp8_decode_avx512.cpp). Only the kernels live
// here (compiled for AMX): the table and its self-test are baseline code (tile_tables.cpp), so no
// library function instantiated with these flags can be picked for code that runs elsewhere.
#include <immintrin.h>

#include "kernels/tile_fp8.inl"
#include "kernels/tile_ggml.inl"
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
      cfg.colsb[i] = s.colsb[i];
      cfg.rows[i] = s.rows[i];
    }
    // Not _tile_loadconfig: GCC 12's declares an 8-byte memory operand, so the stores to the
    // rest of a stack-local config may be dropped as dead (llama.cpp de3ff81 built with GCC 12
    // loads such a config and faults). The whole 64-byte object is the operand here.
    asm volatile("ldtilecfg %0" ::"m"(cfg));
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
  template <int C, int A, int B>
  void dpbssd() {
    constexpr int key = C * 100 + A * 10 + B;
    if constexpr (key == 46) _tile_dpbssd(0, 4, 6);
    else if constexpr (key == 157) _tile_dpbssd(1, 5, 7);
    else static_assert(key == 46, "a tile product tile_ggml.inl does not issue");
  }

  // tile_ggml.inl's vector steps. The 16 accumulators stay in registers: every loop over rows is
  // unrolled and its bound only masks rows off.
  struct Acc {
    __m512 v[16];
  };
  static void clear(Acc& acc) {
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m) acc.v[m] = _mm512_setzero_ps();
  }
  static void add_block(Acc& acc, const int32_t (*c)[16], int rows, const f16_t* dw, const float* dx) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dw)));
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m)
      if (m < rows)
        acc.v[m] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dx[m])),
                                   _mm512_cvtepi32_ps(_mm512_load_si512(c[m])), acc.v[m]);
  }
  static void write(const Acc& acc, int rows, int cols, float* y, int64_t ldy) {
    const __mmask16 keep = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m)
      if (m < rows) _mm512_mask_storeu_ps(y + m * ldy, keep, acc.v[m]);
  }
  // One FP8 tile to BF16 pairs (fp8_decode_avx512.cpp).
  static void decode_fp8(const uint8_t* codes, const Fp8TileScales& s, uint8_t* out) {
    avx512::decode_fp8_tile_vbmi(codes, s, out);
  }
  // Four 64-byte chunks of nibbles to eight lines of (nibble - 8): low nibbles are K groups 0..3,
  // high ones 4..7.
  static void unpack_q4_0(const uint8_t (*q)[64], int8_t* b) {
    const __m512i low = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i raw = _mm512_loadu_si512(q[c]);
      _mm512_storeu_si512(b + 64 * c, _mm512_sub_epi8(_mm512_and_si512(raw, low), eight));
      _mm512_storeu_si512(b + 64 * (c + 4), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, 4), low), eight));
    }
  }
};
#undef EAGLET_TILE_SWITCH

}  // namespace

void matmul_bf16_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                       int64_t ldy) {
  Tiles t;
  tiles::matmul_bf16_pairs(t, x, M, K, w, n0, n1, y, ldy);
}

void matmul_fp8_pairs(const bf16_t* x, int64_t M, int64_t K, const void* w, const Fp8Scales& s, int64_t n0,
                      int64_t n1, float* y, int64_t ldy, uint8_t* panel) {
  Tiles t;
  tiles::matmul_fp8_pairs(t, x, M, K, w, s.data, s.scheme, n0, n1, y, ldy, panel);
}

void matmul_q8_0(const void* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y, int64_t ldy,
                 int8_t* panel) {
  Tiles t;
  tiles::matmul_int8<Tiles, tiles::Q8Tiles>(t, static_cast<const tiles::ActTile*>(act), M, K, w, n0, n1, y, ldy, panel);
}

void matmul_q4_0(const void* act, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y, int64_t ldy,
                 int8_t* panel) {
  Tiles t;
  tiles::matmul_int8<Tiles, tiles::Q4Tiles>(t, static_cast<const tiles::ActTile*>(act), M, K, w, n0, n1, y, ldy, panel);
}

}  // namespace eaglet::kernels::amx
