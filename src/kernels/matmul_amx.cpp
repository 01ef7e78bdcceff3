// The AMX kernels: tile_matmul.inl (BF16), tile_fp8.inl (FP8 decoded onto BF16 tiles) and
// tile_ggml.inl (Q8_0 / Q4_0 on INT8 tiles) over the real tile instructions, with AVX-512 for the
// FP8 decoder and the INT8 kernel's vector steps. Only the kernels live
// here (compiled for AMX): the table and its self-test are baseline code (tile_tables.cpp), so no
// library function instantiated with these flags can be picked for code that runs elsewhere.
#include <immintrin.h>

#include "kernels/tile_fp8.inl"
#include "kernels/tile_ggml.inl"
#include "kernels/tile_matmul.inl"

namespace eaglet::kernels::amx {
namespace {

// The BF16 bits of the e4m3 magnitudes 0..127 (every finite one exact; 127 is NaN), split into
// low and high bytes for VPERMT2B.
constexpr uint16_t e4m3_bf16_bits(int m) {
  const int e = m >> 3, f = m & 7;
  if (m == 0x7f) return 0x7fc0;
  if (e > 0) return uint16_t((e + 120) << 7 | f << 4);  // 2^(e - 7) * (1 + f / 8)
  if (f == 0) return 0;
  const int top = f >= 4 ? 2 : f >= 2 ? 1 : 0;  // subnormal f * 2^-9 = 2^(top - 9) * (f / 2^top)
  return uint16_t((127 + top - 9) << 7 | (f - (1 << top)) << (7 - top));
}
struct Fp8Lut {
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t hi[128];
};
constexpr Fp8Lut make_fp8_lut() {
  Fp8Lut t{};
  for (int m = 0; m < 128; ++m) t.lo[m] = uint8_t(e4m3_bf16_bits(m)), t.hi[m] = uint8_t(e4m3_bf16_bits(m) >> 8);
  return t;
}
constexpr Fp8Lut kFp8Lut = make_fp8_lut();
// Element i of a line belongs to row i / 2: the word index that repeats each row's value twice.
alignas(64) constexpr uint16_t kPairIndex[32] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7,
                                                 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};

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
  // One FP8 tile (16 lines of 32 codes, fp8_pairs.h) to BF16 pairs with the scale folded in.
  // MXFP8 scales that keep every value a normal BF16 (E8M0 10..246, all real checkpoints) are
  // added to the exponent field: on a tile of normal codes only (the packer's flag; most tiles of
  // real weights), the code's bits are moved into BF16's place and rebased without a lookup.
  // Otherwise two byte lookups (VPERMT2B over 128 entries) give the BF16 of each code's
  // magnitude, exact; the sign goes onto the high byte and a byte unpack puts each chunk back in
  // line order; then the exponent add, or for other scales an F32 multiply (exact for powers of
  // two) rounded to BF16. Tiles with a NaN code or scale take the scalar decoder.
  static void decode_fp8(const uint8_t* codes, const Fp8TileScales& s, uint8_t* out) {
    auto* o = reinterpret_cast<bf16_t*>(out);
    const __m512i pairs = _mm512_loadu_si512(kPairIndex);
    bool nan = false;
    if (s.e8m0) {
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.e8m0));
      if (_mm_cmpeq_epi8_mask(e, _mm_set1_epi8(char(0xff)))) return decode_fp8_tile(codes, s, o);
      if (!(_mm_cmplt_epu8_mask(e, _mm_set1_epi8(10)) | _mm_cmpgt_epu8_mask(e, _mm_set1_epi8(char(246))))) {
        const __m256i e16 = _mm256_cvtepu8_epi16(e);  // each row's scale, widened; then per element via `pairs`
        if (s.normal) {  // e4m3's exponent e - 7 becomes BF16's (e + 120) + (scale - 127)
          const __m256i bias16 = _mm256_slli_epi16(_mm256_sub_epi16(e16, _mm256_set1_epi16(7)), 7);
          return rebase(codes, _mm512_permutexvar_epi16(pairs, _mm512_castsi256_si512(bias16)), out);
        }
        // (e - 127) << 7: the scale's exponent, added to the looked-up BF16
        const __m256i adj16 = _mm256_slli_epi16(_mm256_sub_epi16(e16, _mm256_set1_epi16(127)), 7);
        nan = exponent_add(codes, _mm512_permutexvar_epi16(pairs, _mm512_castsi256_si512(adj16)), out);
      } else {  // 2^(e - 127): E8M0 0 is F32's denormal 2^-127
        const __m512i e32 = _mm512_cvtepu8_epi32(e);
        const __m512i bits = _mm512_mask_mov_epi32(_mm512_slli_epi32(e32, 23), _mm512_cmpeq_epi32_mask(e32, _mm512_setzero_si512()),
                                                   _mm512_set1_epi32(0x00400000));
        const __m512 lo = _mm512_permutexvar_ps(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(pairs)), _mm512_castsi512_ps(bits));
        const __m512 hi = _mm512_permutexvar_ps(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(pairs, 1)), _mm512_castsi512_ps(bits));
        nan = multiply(codes, lo, hi, out);
      }
    } else {
      if (!(s.block - s.block == 0.0f)) return decode_fp8_tile(codes, s, o);  // inf or NaN
      nan = multiply(codes, _mm512_set1_ps(s.block), _mm512_set1_ps(s.block), out);
    }
    if (nan) decode_fp8_tile(codes, s, o);
  }
  // The lookups for chunk `ch` (lines 2 ch and 2 ch + 1): the BF16 of each code, signed, as
  // w[0] (line 2 ch) and w[1]. `seen` keeps the largest high byte of a magnitude: 0x7f only for
  // the NaN code (finite ones reach 0x43).
  struct Lut {
    __m512i lo0 = _mm512_load_si512(kFp8Lut.lo), lo1 = _mm512_load_si512(kFp8Lut.lo + 64);
    __m512i hi0 = _mm512_load_si512(kFp8Lut.hi), hi1 = _mm512_load_si512(kFp8Lut.hi + 64);
    __m512i seen = _mm512_setzero_si512();
    void lookup(const uint8_t* codes, int ch, __m512i& w0, __m512i& w1) {
      const __m512i c = _mm512_loadu_si512(codes + 64 * ch);
      const __m512i l = _mm512_permutex2var_epi8(lo0, c, lo1), h = _mm512_permutex2var_epi8(hi0, c, hi1);
      seen = _mm512_max_epu8(seen, h);
      const __m512i hs = _mm512_ternarylogic_epi32(h, c, _mm512_set1_epi8(char(0x80)), 0xF8);  // h | (c & sign)
      w0 = _mm512_unpacklo_epi8(l, hs);
      w1 = _mm512_unpackhi_epi8(l, hs);
    }
    bool nan() const { return _mm512_cmpeq_epi8_mask(seen, _mm512_set1_epi8(0x7f)) != 0; }
  };
  // Normal codes only: each code, unpacked to the high byte of a word (S.EEEE.MMM then eight
  // zeros), shifted right by 4 with its sign copied in and masked to S...EEEE.MMM0000, is a BF16
  // whose exponent field holds e4m3's 4-bit exponent; adding `bias` ((scale - 7) << 7 for each
  // element's row, 3..239 << 7) rebases it. Three operations per 32 values, two byte unpacks per 64.
  static void rebase(const uint8_t* codes, __m512i bias, uint8_t* out) {
    const __m512i zero = _mm512_setzero_si512(), keep = _mm512_set1_epi16(int16_t(0x87f0));
    const auto bf16 = [&](__m512i w) { return _mm512_add_epi16(_mm512_and_si512(_mm512_srai_epi16(w, 4), keep), bias); };
#pragma GCC unroll 8
    for (int ch = 0; ch < 8; ++ch) {
      const __m512i c = _mm512_loadu_si512(codes + 64 * ch);
      _mm512_storeu_si512(out + 128 * ch, bf16(_mm512_unpacklo_epi8(zero, c)));
      _mm512_storeu_si512(out + 128 * ch + 64, bf16(_mm512_unpackhi_epi8(zero, c)));
    }
  }
  // Adds `adj` to every nonzero BF16's exponent field; zeros stay zero. Returns whether a NaN
  // code was seen.
  static bool exponent_add(const uint8_t* codes, __m512i adj, uint8_t* out) {
    Lut lut;
    const __m512i magnitude = _mm512_set1_epi16(0x7fff);
#pragma GCC unroll 8
    for (int ch = 0; ch < 8; ++ch) {
      __m512i w0, w1;
      lut.lookup(codes, ch, w0, w1);
      _mm512_storeu_si512(out + 128 * ch, _mm512_mask_add_epi16(w0, _mm512_test_epi16_mask(w0, magnitude), w0, adj));
      _mm512_storeu_si512(out + 128 * ch + 64, _mm512_mask_add_epi16(w1, _mm512_test_epi16_mask(w1, magnitude), w1, adj));
    }
    return lut.nan();
  }
  // Multiplies each value by its row's F32 scale (`lo` for elements 0..15 of a line, `hi` for
  // 16..31) and rounds to BF16.
  static bool multiply(const uint8_t* codes, __m512 lo, __m512 hi, uint8_t* out) {
    Lut lut;
    const auto scaled = [&](__m512i w) {
      const __m512 f0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(w)), 16));
      const __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1)), 16));
      return (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(f1, hi), _mm512_mul_ps(f0, lo));
    };
#pragma GCC unroll 8
    for (int ch = 0; ch < 8; ++ch) {
      __m512i w0, w1;
      lut.lookup(codes, ch, w0, w1);
      _mm512_storeu_si512(out + 128 * ch, scaled(w0));
      _mm512_storeu_si512(out + 128 * ch + 64, scaled(w1));
    }
    return lut.nan();
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

void decode_fp8_tile_avx512(const uint8_t* codes, const Fp8TileScales& s, uint8_t* out) {
  Tiles::decode_fp8(codes, s, out);
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
