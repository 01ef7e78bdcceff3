#include "kernels/ggml_quant.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/ops.h"

namespace eaglet::kernels {

void q4k_scale_min(const uint8_t* s, int j, uint8_t* scale, uint8_t* min) {
  // Sub-blocks 0..3 keep their 6 bits in bytes 0..7; 4..7 have their low 4 bits in bytes 8..11
  // and their top 2 bits in the spare top bits of bytes 0..7.
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *min = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

void q6k_codes(const BlockQ6_K& b, int8_t* out) {
  // Each half of 128 weights: ql bytes 0..63 and qh bytes 0..31; weight l + 32 * r takes its
  // low 4 bits from ql[l + 32 * (r & 1)] (low nibble for r < 2) and 2 high bits from qh[l].
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  for (int half = 0; half < 2; ++half, out += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; ++l) {
      out[l] = int8_t(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      out[l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
}

namespace {

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = d * float(b[i].q[j]);
  }
}

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(int(b[i].q[j] & 0xF) - 8);
      y[j + 16] = d * float(int(b[i].q[j] >> 4) - 8);
    }
  }
}

void dequant_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].q;
    for (int s = 0; s < 8; s += 2, q += 32) {
      uint8_t sc0, m0, sc1, m1;
      q4k_scale_min(b[i].scales, s, &sc0, &m0);
      q4k_scale_min(b[i].scales, s + 1, &sc1, &m1);
      const float d0 = d * sc0, n0 = dmin * m0, d1 = d * sc1, n1 = dmin * m1;
      for (int l = 0; l < 32; ++l) *y++ = d0 * float(q[l] & 0xF) - n0;
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] >> 4) - n1;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  int8_t q[256];
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = f16_to_f32(b[i].d);
    q6k_codes(b[i], q);
    for (int l = 0; l < 256; ++l) y[l] = d * float(b[i].scales[l / 16]) * float(q[l]);
  }
}

}  // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  EAGLET_CHECK(info && info->supported, "GGUF type {} cannot be decoded", uint32_t(type));
  EAGLET_CHECK(n % info->block_weights == 0, "{} rows need a multiple of {} weights, not {}", info->name,
               info->block_weights, n);
  const int64_t nb = n / info->block_weights;
  switch (type) {
    case GgmlType::F32: return to_f32(DType::F32, src, dst, n);
    case GgmlType::F16: return to_f32(DType::F16, src, dst, n);
    case GgmlType::BF16: return to_f32(DType::BF16, src, dst, n);
    case GgmlType::Q8_0: return dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case GgmlType::Q4_0: return dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case GgmlType::Q4_K: return dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case GgmlType::Q6_K: return dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
  }
}

void quantize_activations(const float* x, int64_t M, int64_t K, ActBlockQ8* out) {
  for (int64_t b = 0; b < M * K / 32; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = d != 0 ? 127.0f / amax : 0.0f;
    out[b].d = d;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += out[b].q[j] = int8_t(std::nearbyint(x[j] * id));
    out[b].sum = sum;
  }
}

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  EAGLET_CHECK(n % 32 == 0, "Q8_0 rows need a multiple of 32 weights, not {}", n);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) y[i].q[j] = int8_t(std::round(x[j] * id));  // halves away from zero, as ggml
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  EAGLET_CHECK(n % 32 == 0, "Q4_0 rows need a multiple of 32 weights, not {}", n);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    // The extreme value maps to -8 exactly; the other side reaches +7 (clamped).
    const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    auto code = [&](float v) { return uint8_t(std::min(15, int(v * id + 8.5f))); };
    for (int j = 0; j < 16; ++j) y[i].q[j] = uint8_t(code(x[j]) | (code(x[j + 16]) << 4));
  }
}

// Round to nearest at both levels: each sub-block of 32 spans [min(0, lowest), highest] in 15
// steps; the eight steps and the eight mins are rounded to 6-bit multiples of d = (largest step)
// / 63 and dmin = (largest min) / 63; codes are rounded against the rounded step and min.
// llama-quantize instead searches each sub-block's step and min for the least squared error
// (make_qkx2_quants), so its blocks differ; both decode by the same formula.
void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n) {
  EAGLET_CHECK(n % 256 == 0, "Q4_K rows need a multiple of 256 weights, not {}", n);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    float step[8], min[8], max_step = 0, max_min = 0;
    for (int s = 0; s < 8; ++s) {
      float lo = 0, hi = -INFINITY;
      for (int j = 0; j < 32; ++j) lo = std::min(lo, x[32 * s + j]), hi = std::max(hi, x[32 * s + j]);
      step[s] = (hi - lo) / 15.0f;
      min[s] = -lo;
      max_step = std::max(max_step, step[s]);
      max_min = std::max(max_min, min[s]);
    }
    BlockQ4_K& b = y[i];
    b.d = f32_to_f16(max_step / 63.0f);
    b.dmin = f32_to_f16(max_min / 63.0f);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    uint8_t sc[8], mn[8];
    for (int s = 0; s < 8; ++s) {
      sc[s] = uint8_t(d > 0 ? std::min(63.0f, std::nearbyint(step[s] / d)) : 0);
      mn[s] = uint8_t(dmin > 0 ? std::min(63.0f, std::nearbyint(min[s] / dmin)) : 0);
    }
    // The inverse of q4k_scale_min's packing.
    for (int s = 0; s < 4; ++s) {
      b.scales[s] = uint8_t(sc[s] | ((sc[s + 4] >> 4) << 6));
      b.scales[s + 4] = uint8_t(mn[s] | ((mn[s + 4] >> 4) << 6));
      b.scales[s + 8] = uint8_t((sc[s + 4] & 0xF) | ((mn[s + 4] & 0xF) << 4));
    }
    uint8_t q[256];
    for (int s = 0; s < 8; ++s) {
      const float ds = d * float(sc[s]), ms = dmin * float(mn[s]);
      for (int j = 0; j < 32; ++j)
        q[32 * s + j] = uint8_t(ds > 0 ? std::clamp(int(std::nearbyint((x[32 * s + j] + ms) / ds)), 0, 15) : 0);
    }
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) b.q[32 * p + l] = uint8_t(q[64 * p + l] | (q[64 * p + 32 + l] << 4));
  }
}

}  // namespace eaglet::kernels
