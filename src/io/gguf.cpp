#include "io/gguf.h"

#include <cstring>

#include "core/error.h"
#include "io/mapped_file.h"

namespace eaglet {

namespace {
class Reader {
 public:
  explicit Reader(const MappedFile& f) : f_(f) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, f_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(f_.data() + pos_), size_t(n));
    pos_ += n;
    return s;
  }
  nlohmann::json value(uint32_t type, int depth = 0) {
    switch (type) {
      case 0: return get<uint8_t>();
      case 1: return get<int8_t>();
      case 2: return get<uint16_t>();
      case 3: return get<int16_t>();
      case 4: return get<uint32_t>();
      case 5: return get<int32_t>();
      case 6: return get<float>();
      case 7: return get<uint8_t>() != 0;
      case 8: return str();
      case 10: return get<uint64_t>();
      case 11: return get<int64_t>();
      case 12: return get<double>();
      case 9: {
        if (depth > 4) fail("{}: GGUF arrays nested too deeply", f_.path());
        const uint32_t et = get<uint32_t>();
        const uint64_t n = get<uint64_t>();
        if (n > f_.size()) fail("{}: GGUF array of {} elements is larger than the file", f_.path(), n);
        nlohmann::json a = nlohmann::json::array();
        for (uint64_t i = 0; i < n; ++i) a.push_back(value(et, depth + 1));
        return a;
      }
      default: fail("{}: unknown GGUF value type {}", f_.path(), type);
    }
  }

 private:
  void need(uint64_t n) {  // written so that a huge n cannot wrap around
    if (n > f_.size() - pos_) fail("{}: truncated GGUF file", f_.path());
  }
  const MappedFile& f_;
  uint64_t pos_ = 0;
};
}  // namespace

nlohmann::json read_gguf_metadata(const std::string& path) {
  MappedFile f(path);
  Reader r(f);
  if (r.get<uint32_t>() != 0x46554747u) fail("{}: not a GGUF file (bad magic)", path);
  const uint32_t version = r.get<uint32_t>();
  if (version < 2 || version > 3) fail("{}: unsupported GGUF version {}", path, version);
  r.get<uint64_t>();  // tensor count
  const uint64_t n_kv = r.get<uint64_t>();
  nlohmann::json out = nlohmann::json::object();
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = r.str();
    out[key] = r.value(r.get<uint32_t>());
  }
  return out;
}

}  // namespace eaglet
