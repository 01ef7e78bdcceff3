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
inline uint8_t* slot(uint8_t (*chunks)[32], int chunk, int64_t lane) { return chunks[chunk] + 4 * lane; }
inline uint8_t* slot(int8_t (*chunks)[32], int chunk, int64_t lane) {
  return reinterpret_cast<uint8_t*>(chunks[chunk]) + 4 * lane;
}

void put(const BlockQ8_0& in, BlockQ8_0x8& g, int64_t lane) {
  g.d[lane] = in.d;
  for (int c = 0; c < 8; ++c) std::memcpy(slot(g.q, c, lane), in.q + 4 * c, 4);
}

void put(const BlockQ4_0& in, BlockQ4_0x8& g, int64_t lane) {
  g.d[lane] = in.d;
  for (int c = 0; c < 4; ++c) std::memcpy(slot(g.q, c, lane), in.q + 4 * c, 4);
}

void put(const BlockQ4_K& in, BlockQ4_Kx8& g, int64_t lane) {
  g.d[lane] = in.d;
  g.dmin[lane] = in.dmin;
  for (int s = 0; s < 8; ++s) q4k_scale_min(in.scales, s, &g.scales[s][lane], &g.mins[s][lane]);
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 8; ++c) std::memcpy(slot(g.q[p], c, lane), in.q + 32 * p + 4 * c, 4);
}

void put(const BlockQ6_K& in, BlockQ6_Kx8& g, int64_t lane) {
  g.d[lane] = in.d;
  for (int s = 0; s < 16; ++s) g.scales[s][lane] = in.scales[s];
  int8_t codes[256];
  q6k_codes(in, codes);
  for (int c = 0; c < 64; ++c) std::memcpy(slot(g.q, c, lane), codes + 4 * c, 4);
}

template <class Block, class Group>
std::vector<uint8_t> interleave(const void* blocks, int64_t rows, int64_t nb) {
  const int64_t groups = (rows + kRowGroup - 1) / kRowGroup;
  std::vector<uint8_t> out(size_t(groups * nb) * sizeof(Group), 0);  // padding rows: zero scales and codes
  auto* g = reinterpret_cast<Group*>(out.data());
  const auto* in = static_cast<const Block*>(blocks);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) put(in[r * nb + b], g[(r / kRowGroup) * nb + b], r % kRowGroup);
  return out;
}

}  // namespace

std::vector<uint8_t> interleave_rows(GgmlType type, const void* blocks, int64_t rows, int64_t cols) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  EAGLET_CHECK(info && cols % info->block_weights == 0, "internal: {} columns are not whole blocks", cols);
  const int64_t nb = cols / info->block_weights;
  switch (type) {
    case GgmlType::Q8_0: return interleave<BlockQ8_0, BlockQ8_0x8>(blocks, rows, nb);
    case GgmlType::Q4_0: return interleave<BlockQ4_0, BlockQ4_0x8>(blocks, rows, nb);
    case GgmlType::Q4_K: return interleave<BlockQ4_K, BlockQ4_Kx8>(blocks, rows, nb);
    case GgmlType::Q6_K: return interleave<BlockQ6_K, BlockQ6_Kx8>(blocks, rows, nb);
    default: fail("internal: GGUF type {} has no interleaved layout", info->name);
  }
}

namespace {

// The inverse of put() for the two types whose blocks are a scale and 4-byte chunks of codes.
template <class Block, class Group, int kChunks>
void take(const Group& g, int64_t lane, Block& o) {
  o.d = g.d[lane];
  for (int c = 0; c < kChunks; ++c) std::memcpy(o.q + 4 * c, g.q[c] + 4 * lane, 4);
}

}  // namespace

void deinterleave_row(GgmlType type, const void* interleaved, int64_t cols, int64_t r, void* out) {
  EAGLET_CHECK(type == GgmlType::Q8_0 || type == GgmlType::Q4_0, "internal: only Q8_0 / Q4_0 rows deinterleave");
  const int64_t nb = cols / 32, lane = r % kRowGroup, first = (r / kRowGroup) * nb;
  for (int64_t b = 0; b < nb; ++b) {
    if (type == GgmlType::Q8_0)
      take<BlockQ8_0, BlockQ8_0x8, 8>(static_cast<const BlockQ8_0x8*>(interleaved)[first + b], lane,
                                      static_cast<BlockQ8_0*>(out)[b]);
    else
      take<BlockQ4_0, BlockQ4_0x8, 4>(static_cast<const BlockQ4_0x8*>(interleaved)[first + b], lane,
                                      static_cast<BlockQ4_0*>(out)[b]);
  }
}

}  // namespace eaglet::kernels
