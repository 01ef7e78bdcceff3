#include "io/gguf.h"

#include <cstring>

#include <algorithm>

#include "core/error.h"
#include "io/gguf_types.h"

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

 public:
  uint64_t pos() const { return pos_; }
};

// Header and key/value section; leaves `r` at the tensor directory.
nlohmann::json read_header(Reader& r, const std::string& path, uint64_t* n_tensors) {
  if (r.get<uint32_t>() != 0x46554747u) fail("{}: not a GGUF file (bad magic)", path);
  const uint32_t version = r.get<uint32_t>();
  if (version < 2 || version > 3) fail("{}: unsupported GGUF version {}", path, version);
  *n_tensors = r.get<uint64_t>();
  const uint64_t n_kv = r.get<uint64_t>();
  nlohmann::json out = nlohmann::json::object();
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = r.str();
    out[key] = r.value(r.get<uint32_t>());
  }
  return out;
}
}  // namespace

int64_t GgufTensor::rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

GgufFile::GgufFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  Reader r(*file_);
  uint64_t n_tensors = 0;
  meta_ = read_header(r, path, &n_tensors);
  if (n_tensors > file_->size() / 24) fail("{}: GGUF header claims {} tensors, more than the file can hold", path, n_tensors);
  uint64_t alignment = 32;
  if (meta_.contains("general.alignment")) {
    const auto& a = meta_["general.alignment"];
    if (!a.is_number_unsigned() || a.get<uint64_t>() == 0 || (a.get<uint64_t>() & (a.get<uint64_t>() - 1)))
      fail("{}: general.alignment must be a power of two, not {}", path, a.dump());
    alignment = a.get<uint64_t>();
  }
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = r.str();
    const uint32_t n_dims = r.get<uint32_t>();
    if (n_dims < 1 || n_dims > 4) fail("{}: tensor '{}' has {} dimensions (1 to 4 allowed)", path, t.name, n_dims);
    int64_t count = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = r.get<uint64_t>();
      if (n == 0 || n > (uint64_t(1) << 40) || count > (int64_t(1) << 50) / int64_t(n))
        fail("{}: tensor '{}' has a bad dimension {} ({})", path, t.name, d, n);
      t.dims.push_back(int64_t(n));
      count *= int64_t(n);
    }
    t.type = r.get<uint32_t>();
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    if (!info) fail("{}: tensor '{}' has unknown GGUF type {}", path, t.name, t.type);
    if (t.dims[0] % info->block_weights != 0)
      fail("{}: tensor '{}' ({}) has rows of {} weights, not whole blocks of {}", path, t.name, info->name, t.dims[0],
           info->block_weights);
    t.nbytes = size_t(count / info->block_weights) * info->block_bytes;
    offsets.push_back(r.get<uint64_t>());
    if (!index_.emplace(t.name, tensors_.size()).second) fail("{}: tensor '{}' appears twice", path, t.name);
    tensors_.push_back(std::move(t));
  }
  const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensor& t = tensors_[i];
    if (offsets[i] % alignment != 0)
      fail("{}: tensor '{}' starts at offset {}, not a multiple of the alignment {}", path, t.name, offsets[i], alignment);
    if (data_start > file_->size() || offsets[i] > file_->size() - data_start ||
        t.nbytes > file_->size() - data_start - offsets[i])
      fail("{}: tensor '{}' ({} bytes at offset {}) runs past the end of the file (truncated?)", path, t.name, t.nbytes,
           offsets[i]);
    t.data = file_->data() + data_start + offsets[i];
  }
}

const GgufTensor* GgufFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::get(const std::string& name) const {
  const GgufTensor* t = find(name);
  if (!t) fail("{}: tensor '{}' not found", path(), name);
  return *t;
}

nlohmann::json read_gguf_metadata(const std::string& path) {
  MappedFile f(path);
  Reader r(f);
  uint64_t n_tensors = 0;
  return read_header(r, path, &n_tensors);
}

}  // namespace eaglet
