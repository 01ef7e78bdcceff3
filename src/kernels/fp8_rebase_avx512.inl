// The fast path of the AVX-512 FP8 decoder (fp8_pairs.h), shared by the tile decoder
// (fp8_decode_avx512.cpp) and the vector kernel that rebases codes in registers as it multiplies
// (pairs_avx512.cpp): MXFP8 tiles of normal codes only (the packer's flag; most tiles of real
// weights) whose scales keep every value a normal BF16 (E8M0 10..246, all real checkpoints).
// Needs AVX-512 BW and VL.
#pragma once
#include <immintrin.h>

#include "kernels/fp8_pairs.h"

namespace eaglet::kernels::avx512 {
namespace {

// Element i of a line belongs to row i / 2: the word index that repeats each row's value twice.
alignas(64) constexpr uint16_t kPairIndex[32] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7,
                                                 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};

// A tile's 16 E8M0 scales, one per row (the first bytes of its record, fp8_pairs.h).
inline __m128i fp8_tile_e8m0(const uint8_t* e8m0) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(e8m0)); }
// Whether every scale keeps the tile's values normal BF16s (NaN, 255, is outside too); a tile
// rebases when this holds and its record's flag says its codes are all normal.
inline bool e8m0_rebases(__m128i e) {
  return !(_mm_cmplt_epu8_mask(e, _mm_set1_epi8(10)) | _mm_cmpgt_epu8_mask(e, _mm_set1_epi8(char(246))));
}
// Per element of a line, its row's (scale - 7) << 7: e4m3's exponent e - 7 becomes BF16's
// (e + 120) + (scale - 127).
inline __m512i fp8_rebase_bias(__m128i e) {
  const __m256i bias16 = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_cvtepu8_epi16(e), _mm256_set1_epi16(7)), 7);
  return _mm512_permutexvar_epi16(_mm512_loadu_si512(kPairIndex), _mm512_castsi256_si512(bias16));
}
// Codes in the high bytes of words (a byte unpack with zero puts them there: S.EEEE.MMM then eight
// zeros) to BF16: shifted right by 4 with the sign copied in and masked to S...EEEE.MMM0000, a
// BF16 whose exponent field holds e4m3's 4-bit exponent; adding `bias` rebases it. Three
// operations per 32 values (3..239 << 7 never carries into the sign).
inline __m512i fp8_rebase(__m512i w, __m512i bias) {
  return _mm512_add_epi16(_mm512_and_si512(_mm512_srai_epi16(w, 4), _mm512_set1_epi16(int16_t(0x87f0))), bias);
}

}  // namespace
}  // namespace eaglet::kernels::avx512
