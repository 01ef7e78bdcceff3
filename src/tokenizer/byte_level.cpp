#include "tokenizer/byte_level.h"

#include <array>

namespace eaglet {

namespace {
struct ByteMap {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<int, 512> cp_to_byte;  // every mapped code point is < 512
  ByteMap() {
    cp_to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_to_cp[size_t(b)] = printable ? uint32_t(b) : uint32_t(256 + n++);
      cp_to_byte[byte_to_cp[size_t(b)]] = b;
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

bool byte_level_decode(const std::string& mapped, std::string* raw) {
  raw->clear();
  const auto& m = byte_map();
  for (size_t i = 0; i < mapped.size();) {
    const unsigned char c = static_cast<unsigned char>(mapped[i]);
    uint32_t cp;
    if (c < 0x80) { cp = c; i += 1; }
    else if ((c & 0xE0) == 0xC0 && i + 1 < mapped.size()) {
      cp = (uint32_t(c & 0x1F) << 6) | (static_cast<unsigned char>(mapped[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;
    }
    if (cp >= 512 || m.cp_to_byte[cp] < 0) return false;
    raw->push_back(char(m.cp_to_byte[cp]));
  }
  return true;
}

std::string byte_level_encode(const std::string& raw) {
  std::string out;
  for (unsigned char b : raw) {
    const uint32_t cp = byte_map().byte_to_cp[b];
    if (cp < 0x80) out.push_back(char(cp));
    else {
      out.push_back(char(0xC0 | (cp >> 6)));
      out.push_back(char(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

}  // namespace eaglet
