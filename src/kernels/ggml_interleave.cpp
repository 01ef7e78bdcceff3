#include "kernels/ggml_interleave.h"

#include <cstring>

#include "core/error.h"

namespace eaglet::kernels {

GgmlType ggml_type_of(QuantScheme q) {
  switch (q) {
    case QuantScheme::Q8_0: return GgmlType::Q8_0;
    case QuantScheme::Q4_0: return GgmlType::Q4_0;
    case QuantScheme::Q4_K: return GgmlType::Q4_K;
    case QuantScheme::Q6_K: return GgmlType::Q6_K;
    default: fail("internal: scheme {} is not a GGUF block type", int(q));
  }
}

QuantScheme interleaved_scheme(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return QuantScheme::Q8_0;
    case GgmlType::Q4_0: return QuantScheme::Q4_0;
    case GgmlType::Q4_K: return QuantScheme::Q4_K;
    case GgmlType::Q6_K: return QuantScheme::Q6_K;
    default: return QuantScheme::None;
  }
}

namespace {

// Row `lane`'s 4-byte slot in chunk `chunk`.
template <class T, size_t N>
inline uint8_t* slot(T (*chunks)[N], int chunk, int64_t lane) {
  return reinterpret_cast<uint8_t*>(chunks[chunk]) + 4 * lane;
}

template <int R>
void put(const BlockQ8_0& in, GroupQ8_0<R>& g, int64_t lane) {
  g.d[lane] = in.d;
  for (int c = 0; c < 8; ++c) std::memcpy(slot(g.q, c, lane), in.q + 4 * c, 4);
}

template <int R>
void put(const BlockQ4_0& in, GroupQ4_0<R>& g, int64_t lane) {
  g.d[lane] = in.d;
  for (int c = 0; c < 4; ++c) std::memcpy(slot(g.q, c, lane), in.q + 4 * c, 4);
}

template <int R>
void put(const BlockQ4_K& in, GroupQ4_K<R>& g, int64_t lane) {
  g.d[lane] = in.d;
  g.dmin[lane] = in.dmin;
  for (int s = 0; s < 8; ++s) q4k_scale_min(in.scales, s, &g.scales[s][lane], &g.mins[s][lane]);
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 8; ++c) std::memcpy(slot(g.q[p], c, lane), in.q + 32 * p + 4 * c, 4);
}

template <int R>
void put(const BlockQ6_K& in, GroupQ6_K<R>& g, int64_t lane) {
  g.d[lane] = in.d;
  for (int s = 0; s < 16; ++s) g.scales[s][lane] = in.scales[s];
  int8_t codes[256];
  q6k_codes(in, codes);
  for (int c = 0; c < 64; ++c) std::memcpy(slot(g.q, c, lane), codes + 4 * c, 4);
}

template <class Block, class Group, int R>
AlignedBytes interleave(const void* blocks, int64_t rows, int64_t nb) {
  const int64_t groups = (rows + R - 1) / R;
  AlignedBytes out(size_t(groups * nb) * sizeof(Group), 0);  // padding rows: zero scales and codes
  auto* g = reinterpret_cast<Group*>(out.data());
  const auto* in = static_cast<const Block*>(blocks);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) put<R>(in[r * nb + b], g[(r / R) * nb + b], r % R);
  return out;
}

template <int R>
AlignedBytes interleave_by(GgmlType type, const void* blocks, int64_t rows, int64_t nb) {
  switch (type) {
    case GgmlType::Q8_0: return interleave<BlockQ8_0, GroupQ8_0<R>, R>(blocks, rows, nb);
    case GgmlType::Q4_0: return interleave<BlockQ4_0, GroupQ4_0<R>, R>(blocks, rows, nb);
    case GgmlType::Q4_K: return interleave<BlockQ4_K, GroupQ4_K<R>, R>(blocks, rows, nb);
    case GgmlType::Q6_K: return interleave<BlockQ6_K, GroupQ6_K<R>, R>(blocks, rows, nb);
    default: fail("internal: GGUF type {} has no interleaved layout", ggml_type_info(uint32_t(type))->name);
  }
}

// The inverse of put() for the two types whose blocks are a scale and 4-byte chunks of codes.
template <class Block, class Group, int kChunks>
void take(const Group& g, int64_t lane, Block& o) {
  o.d = g.d[lane];
  for (int c = 0; c < kChunks; ++c) std::memcpy(o.q + 4 * c, g.q[c] + 4 * lane, 4);
}

template <int R>
void deinterleave_by(GgmlType type, const void* interleaved, int64_t cols, int64_t r, void* out) {
  const int64_t nb = cols / 32, lane = r % R, first = (r / R) * nb;
  for (int64_t b = 0; b < nb; ++b) {
    if (type == GgmlType::Q8_0)
      take<BlockQ8_0, GroupQ8_0<R>, 8>(static_cast<const GroupQ8_0<R>*>(interleaved)[first + b], lane,
                                       static_cast<BlockQ8_0*>(out)[b]);
    else
      take<BlockQ4_0, GroupQ4_0<R>, 4>(static_cast<const GroupQ4_0<R>*>(interleaved)[first + b], lane,
                                       static_cast<BlockQ4_0*>(out)[b]);
  }
}

}  // namespace

AlignedBytes interleave_rows(GgmlType type, const void* blocks, int64_t rows, int64_t cols, int group) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  EAGLET_CHECK(info && cols % info->block_weights == 0, "internal: {} columns are not whole blocks", cols);
  EAGLET_CHECK(group == kRowGroup || group == kRowGroup16, "internal: rows interleave by 8 or 16, not {}", group);
  const int64_t nb = cols / info->block_weights;
  return group == kRowGroup ? interleave_by<kRowGroup>(type, blocks, rows, nb)
                            : interleave_by<kRowGroup16>(type, blocks, rows, nb);
}

void deinterleave_row(GgmlType type, const void* interleaved, int64_t cols, int64_t r, void* out, int group) {
  EAGLET_CHECK(type == GgmlType::Q8_0 || type == GgmlType::Q4_0, "internal: only Q8_0 / Q4_0 rows deinterleave");
  EAGLET_CHECK(group == kRowGroup || group == kRowGroup16, "internal: rows interleave by 8 or 16, not {}", group);
  if (group == kRowGroup) deinterleave_by<kRowGroup>(type, interleaved, cols, r, out);
  else deinterleave_by<kRowGroup16>(type, interleaved, cols, r, out);
}

}  // namespace eaglet::kernels
