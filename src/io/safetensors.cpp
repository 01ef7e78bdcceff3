#include "io/safetensors.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace eaglet {

using json = nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
// Where the tensor data starts (8 + header length); 0 when the file is too short to say, which
// the constructor then reports.
size_t payload_offset(const std::string& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  if (!in.read(reinterpret_cast<char*>(&header_len), 8)) return 0;
  return header_len > (uint64_t(1) << 40) ? 0 : size_t(8 + header_len);
}
}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path, payload_offset(path)) {
  const size_t size = file_.size();
  if (size < 8) fail("{}: truncated safetensors file ({} bytes, no header)", path, size);
  uint64_t header_len;
  std::memcpy(&header_len, file_.data(), 8);
  if (header_len > size - 8)
    fail("{}: truncated safetensors file (header of {} bytes, file has {})", path, header_len, size);
  json header;
  try {
    header = json::parse(file_.data() + 8, file_.data() + 8 + header_len);
  } catch (const json::exception& e) {
    fail("{}: bad safetensors header JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: safetensors header is not a JSON object", path);
  const uint8_t* base = file_.data() + 8 + header_len;
  // Only worth a line for files whose speed matters (16 MB of tensors and up).
  if (reinterpret_cast<uintptr_t>(base) % 64 != 0 && size - 8 - header_len >= (size_t(1) << 24))
    spdlog::info("{}: tensor data starts mid cache line (byte {}), which slows the kernels; --no-mmap realigns it",
                 path, 8 + header_len);
  const size_t data_size = size - 8 - header_len;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (v.is_object())
        for (auto& [k, mv] : v.items())
          if (mv.is_string()) metadata_[k] = mv.get<std::string>();
      continue;
    }
    TensorInfo t;
    t.name = name;
    t.file = &file_.path();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      fail("{}: tensor '{}' has a malformed header entry", path, name);
    const std::string dt = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
    if (!parse_dtype(dt, &t.dtype)) fail("{}: tensor '{}' has unsupported dtype '{}'", path, name, dt);
    int64_t numel = 1, bytes = 0;
    for (auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}' has a bad shape", path, name);
      t.shape.push_back(d.get<int64_t>());
      // A shape whose size overflows would wrap around to one that fits the bytes given.
      if (__builtin_mul_overflow(numel, t.shape.back(), &numel))
        fail("{}: tensor '{}' has a shape {} of more than 2^63 elements", path, name, v["shape"].dump());
    }
    if (__builtin_mul_overflow(numel, int64_t(dtype_size(t.dtype)), &bytes))
      fail("{}: tensor '{}' of shape {} needs more than 2^63 bytes", path, name, v["shape"].dump());
    auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor '{}' has bad data_offsets", path, name);
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size)
      fail("{}: truncated safetensors file: tensor '{}' ends at byte {} of a {}-byte data section",
           path, name, e, data_size);
    t.nbytes = e - b;
    if (uint64_t(bytes) != t.nbytes)
      fail("{}: tensor '{}' {} {} needs {} bytes but has {}", path, name, dtype_name(t.dtype), t.shape_str(), bytes,
           t.nbytes);
    t.data = base + b;
    tensors_.emplace(name, std::move(t));
  }
}

Checkpoint Checkpoint::open_file(const std::string& path) {
  Checkpoint c;
  c.where_ = path;
  c.files_.push_back(std::make_shared<SafetensorsFile>(path));
  for (auto& [n, t] : c.files_.back()->tensors()) c.index_[n] = &t;
  return c;
}

Checkpoint Checkpoint::open_dir(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (file_exists(single)) {
    Checkpoint c = open_file(single);
    c.where_ = dir;
    return c;
  }
  if (!file_exists(index)) fail("{}: no model.safetensors or model.safetensors.index.json", dir);
  json j;
  try {
    j = json::parse(read_text_file(index));
  } catch (const json::exception& e) {
    fail("{}: bad JSON: {}", index, e.what());
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    fail("{}: missing field 'weight_map'", index);
  Checkpoint c;
  c.where_ = dir;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (auto& [name, f] : j["weight_map"].items()) {
    if (!f.is_string()) fail("{}: weight_map['{}'] is not a file name", index, name);
    const std::string shard = f.get<std::string>();
    if (!shards.count(shard)) {
      shards[shard] = std::make_shared<SafetensorsFile>(dir + "/" + shard);
      c.files_.push_back(shards[shard]);
    }
    auto& ts = shards[shard]->tensors();
    auto it = ts.find(name);
    if (it == ts.end()) fail("{}/{}: tensor '{}' listed in the index is missing", dir, shard, name);
    c.index_[name] = &it->second;
  }
  return c;
}

const TensorInfo& Checkpoint::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("{}: missing tensor '{}'", where_, name);
  released_.check(where_, name);
  return *it->second;
}

size_t Checkpoint::release(const std::string& name) {
  const TensorInfo& t = get(name);
  return released_.release(name, t.data, t.nbytes);
}

const TensorInfo& Checkpoint::get(const std::string& name, const std::vector<int64_t>& shape,
                                  std::initializer_list<DType> allowed) const {
  const TensorInfo& t = get(name);
  if (t.shape != shape) {
    TensorInfo want;
    want.shape = shape;
    fail("{}: tensor '{}' has shape {}, expected {}", *t.file, name, t.shape_str(), want.shape_str());
  }
  if (allowed.size()) {
    bool ok = false;
    for (DType d : allowed) ok |= d == t.dtype;
    if (!ok) fail("{}: tensor '{}' has unsupported dtype {}", *t.file, name, dtype_name(t.dtype));
  }
  return t;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (auto& [n, t] : index_) out.push_back(n);
  return out;
}

void write_safetensors_streamed(const std::string& path, const std::vector<TensorHeader>& headers,
                                const std::function<std::string(size_t)>& bytes_of,
                                const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t off = 0;
  std::vector<uint64_t> sizes;
  for (auto& t : headers) {
    uint64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= uint64_t(d);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    sizes.push_back(n);
    off += n;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h += ' ';
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{}: cannot write", path);
  uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), std::streamsize(h.size()));
  for (size_t i = 0; i < headers.size(); ++i) {
    const std::string bytes = bytes_of(i);
    if (bytes.size() != sizes[i])
      fail("{}: tensor {} has {} bytes, its shape needs {}", path, headers[i].name, bytes.size(), sizes[i]);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  if (!out) fail("{}: write failed", path);
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorHeader> headers;
  for (auto& t : tensors) headers.push_back({t.name, t.dtype, t.shape});
  write_safetensors_streamed(path, headers, [&](size_t i) { return tensors[i].bytes; }, metadata);
}

}  // namespace eaglet
