// GGUF block matmuls (Q8_0, Q4_0, Q4_K, Q6_K) on AVX2 (the AVX-512 tables use them too), on rows
// interleaved in groups of 8 (kernels/ggml_interleave.h). One 32-byte load holds 4 consecutive codes of 8 rows; the
// matching 4 activation codes are broadcast to all 8 lanes and vpmaddubsw + vpmaddwd leave each
// row's exact integer dot product in its own 32-bit lane. A block of 32 weights x 8 rows ends as
// one register of 8 row sums, scaled by the 8 row scales times the activation scale in one FMA:
// no per-row horizontal sum, and each activation load feeds 8 rows. Decode is then bound by the
// weight stream rather than by instructions, and a batch of M rows unpacks each block once.
//
// Q4_0 multiplies the unsigned nibbles (vpmaddubsw's unsigned operand, so no sign fix-up) and
// subtracts 8 * (sum of the activation codes) once per block: sum((q - 8) x) = sum(q x) - 8 sum(x).
// Nibble pairs sum to at most 2 * 15 * 127, so all 8 vpmaddubsw of a block add up in 16 bits
// (30480 < 2^15) before one vpmaddwd. Q4_K does the same per sub-block of 32 and takes
// min * (sum of the activation codes) off after. Q8_0 moves the weight's sign onto the activation
// (vpsignb) and multiplies |w|; a pair reaches 2 * 128 * 127, so each is widened at once. Q6_K
// (codes -32..31, widened at load) does the same, but its pairs stay under 2 * 32 * 127, so the 4
// vpmaddubsw of a 16-weight sub-block add up in 16 bits.
//
// Batch invariance: each output's integer sums are exact and its float operations are the same
// per block, in block order, whatever tile of rows it is computed in; the scalar reference runs
// the same sequence, so all ISAs agree bitwise.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"
#include "kernels/row_tiles.h"

// Every loop over the rows of a tile or the chunks of a block is unrolled: left alone, -O2 keeps
// the tile's sums on the stack and loads and stores them per chunk (2x slower at 4 rows).
#define EAGLET_UNROLL _Pragma("GCC unroll 8")

namespace eaglet::kernels::avx2 {
namespace {

// Software prefetch this far ahead of the block being read: with one sequential stream per
// thread the hardware prefetcher alone left decode at ~19-21 GB/s of a ~30 GB/s read probe
// (2-core AMD EPYC); 1-2 KB ahead reached 24-26 GB/s.
constexpr int64_t kPrefetchBytes = 1536;

inline __m256i load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Four activation codes broadcast to the 8 row lanes.
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Adds a block's 8 row dot products (exact integers) times row scale * activation scale.
inline __m256 scaled(__m256 acc, __m256 scale, const ActBlockQ8& a, __m256i dot) {
  return _mm256_fmadd_ps(_mm256_mul_ps(scale, _mm256_set1_ps(a.d)), _mm256_cvtepi32_ps(dot), acc);
}

inline __m256 f16x8(const f16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// 8 row scales: d * (8 small integers, one per row).
inline __m256 times_u8(__m256 d, const uint8_t* p) {
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}
inline __m256 times_i8(__m256 d, const int8_t* p) {
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}

// The 8 row sums (16-bit pair sums of vpmaddubsw added up) widened to 32 bits.
inline __m256i widen(__m256i s16) { return _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); }

// Each type's block of 8 rows: `a[r]` points to the first of the block's kActBlocks activation
// blocks of tile row r. Chunks are the outer loop so each is unpacked once for the tile's R rows,
// and every loop is unrolled so the R partial sums stay in registers.
struct Q4 {
  using Group = BlockQ4_0x8;
  static constexpr int kActBlocks = 1;
  template <int R>
  static void block(const Group& g, const ActBlockQ8* const* a, __m256* acc) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    __m256i s[R];
    EAGLET_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i raw = load32(g.q[c]);
      const __m256i lo = _mm256_and_si256(raw, low);                         // weights 4c..4c+3
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);  // weights 16+4c..
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, broadcast4(a[r]->q + 4 * c)),
                                           _mm256_maddubs_epi16(hi, broadcast4(a[r]->q + 16 + 4 * c)));
        s[r] = c == 0 ? p : _mm256_add_epi16(s[r], p);
      }
    }
    const __m256 d = f16x8(g.d);
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r)
      acc[r] = scaled(acc[r], d, *a[r], _mm256_sub_epi32(widen(s[r]), _mm256_set1_epi32(8 * a[r]->sum)));
  }
};

struct Q8 {
  using Group = BlockQ8_0x8;
  static constexpr int kActBlocks = 1;
  template <int R>
  static void block(const Group& g, const ActBlockQ8* const* a, __m256* acc) {
    __m256i s[R];
    EAGLET_UNROLL
    for (int c = 0; c < 8; ++c) {
      const __m256i w = load32(g.q[c]);
      const __m256i abs_w = _mm256_sign_epi8(w, w);
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256i p = widen(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(broadcast4(a[r]->q + 4 * c), w)));
        s[r] = c == 0 ? p : _mm256_add_epi32(s[r], p);
      }
    }
    const __m256 d = f16x8(g.d);
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = scaled(acc[r], d, *a[r], s[r]);
  }
};

struct Q4K {
  using Group = BlockQ4_Kx8;
  static constexpr int kActBlocks = 8;
  template <int R>
  static void block(const Group& g, const ActBlockQ8* const* a, __m256* acc) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256 d = f16x8(g.d), dmin = f16x8(g.dmin);
    for (int p = 0; p < 4; ++p) {  // sub-blocks 2p (low nibbles) and 2p + 1 (high)
      __m256i s0[R], s1[R];
      EAGLET_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m256i raw = load32(g.q[p][c]);
        const __m256i lo = _mm256_and_si256(raw, low), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
        EAGLET_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m256i p0 = _mm256_maddubs_epi16(lo, broadcast4(a[r][2 * p].q + 4 * c));
          const __m256i p1 = _mm256_maddubs_epi16(hi, broadcast4(a[r][2 * p + 1].q + 4 * c));
          s0[r] = c == 0 ? p0 : _mm256_add_epi16(s0[r], p0);
          s1[r] = c == 0 ? p1 : _mm256_add_epi16(s1[r], p1);
        }
      }
      EAGLET_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int sub = 2 * p + h;
        const __m256 scale = times_u8(d, g.scales[sub]), min = times_u8(dmin, g.mins[sub]);
        EAGLET_UNROLL
        for (int r = 0; r < R; ++r) {
          const ActBlockQ8& ab = a[r][sub];
          acc[r] = scaled(acc[r], scale, ab, widen(h == 0 ? s0[r] : s1[r]));
          acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(min, _mm256_set1_ps(ab.d)), _mm256_set1_ps(float(ab.sum)), acc[r]);
        }
      }
    }
  }
};

struct Q6K {
  using Group = BlockQ6_Kx8;
  static constexpr int kActBlocks = 8;
  template <int R>
  static void block(const Group& g, const ActBlockQ8* const* a, __m256* acc) {
    const __m256 d = f16x8(g.d);
    for (int h = 0; h < 16; ++h) {  // sub-blocks of 16 weights: half h % 2 of activation block h / 2
      __m256i s[R];
      EAGLET_UNROLL
      for (int c = 0; c < 4; ++c) {
        const __m256i w = load32(g.q[4 * h + c]);
        const __m256i abs_w = _mm256_sign_epi8(w, w);
        EAGLET_UNROLL
        for (int r = 0; r < R; ++r) {
          const int8_t* xq = a[r][h / 2].q + 16 * (h % 2) + 4 * c;
          const __m256i p = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(broadcast4(xq), w));
          s[r] = c == 0 ? p : _mm256_add_epi16(s[r], p);
        }
      }
      const __m256 scale = times_i8(d, g.scales[h]);
      EAGLET_UNROLL
      for (int r = 0; r < R; ++r) acc[r] = scaled(acc[r], scale, a[r][h / 2], widen(s[r]));
    }
  }
};

// Rows m..m+R-1 of the 8 outputs of one row group, `valid` of which exist.
template <class Q, int R>
void group_tile(const ActBlockQ8* x, int64_t m, int64_t K, const typename Q::Group* g, float* y, int64_t ldy,
                int64_t valid) {
  const int64_t nbx = K / 32, nb = nbx / Q::kActBlocks;
  __m256 acc[R];
  EAGLET_UNROLL
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const ActBlockQ8* a[R];
  for (int64_t b = 0; b < nb; ++b) {
    EAGLET_UNROLL
    for (int r = 0; r < R; ++r) a[r] = x + (m + r) * nbx + b * Q::kActBlocks;
    const char* ahead = reinterpret_cast<const char*>(g + b) + kPrefetchBytes;
    for (size_t line = 0; line < sizeof(*g); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    Q::template block<R>(g[b], a, acc);
  }
  EAGLET_UNROLL
  for (int r = 0; r < R; ++r) {
    float* out = y + (m + r) * ldy;
    if (valid >= kRowGroup) {
      _mm256_storeu_ps(out, acc[r]);
    } else {
      alignas(32) float tmp[kRowGroup];
      _mm256_store_ps(tmp, acc[r]);
      std::memcpy(out, tmp, size_t(valid) * sizeof(float));
    }
  }
}

// n0 is a multiple of 8 (the dispatcher's row grain is); outputs past n1 are not written.
template <class Q>
void matmul_groups(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy) {
  const int64_t nb = K / (32 * Q::kActBlocks);
  const auto* groups = static_cast<const typename Q::Group*>(w);
  for (int64_t n = n0; n < n1; n += kRowGroup) {
    const typename Q::Group* g = groups + (n / kRowGroup) * nb;
    for_row_tiles(M, [&](auto R, int64_t m) { group_tile<Q, R()>(x, m, K, g, y + n, ldy, n1 - n); });
  }
}

}  // namespace

// The same codes as the scalar quantize_activations: amax / 127 and 127 / amax computed alike, the
// product rounded to nearest even (vcvtps2dq under the default rounding mode, as nearbyint).
void quantize_activations(const float* x, int64_t M, int64_t K, ActBlockQ8* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
  for (int64_t b = 0; b < M * K / 32; ++b, x += 32) {
    __m256 v[4];
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      mx = _mm256_max_ps(mx, _mm256_and_ps(v[i], abs_mask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f, id = d != 0 ? 127.0f / amax : 0.0f;
    const __m256 scale = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], scale));
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    out[b].d = d;
    out[b].sum = _mm_cvtsi128_si32(s4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q), _mm256_permutevar8x32_epi32(bytes, order));
  }
}

void matmul_q8_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<Q8>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_q4_0(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<Q4>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_q4_k(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<Q4K>(x, M, K, w, n0, n1, y, ldy);
}

void matmul_q6_k(const ActBlockQ8* x, int64_t M, int64_t K, const void* w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  matmul_groups<Q6K>(x, M, K, w, n0, n1, y, ldy);
}

}  // namespace eaglet::kernels::avx2
