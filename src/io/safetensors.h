// Safetensors checkpoints: a single `model.safetensors` or shards listed by
// `model.safetensors.index.json`, all memory-mapped. Every tensor is validated (dtype known,
// offsets inside the file, byte size matching the shape) when the header is read.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"

namespace eaglet {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  const std::string* file = nullptr;  // for error messages

  int64_t numel() const;
  std::string shape_str() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory, across shards.
class Checkpoint {
 public:
  static Checkpoint open_dir(const std::string& dir);
  static Checkpoint open_file(const std::string& path);

  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const TensorInfo& get(const std::string& name) const;  // throws naming the tensor and dir
  // Checks the shape (and that the dtype is one of `allowed`, when given) and returns the tensor.
  const TensorInfo& get(const std::string& name, const std::vector<int64_t>& shape,
                        std::initializer_list<DType> allowed = {}) const;
  std::vector<std::string> names() const;
  const std::string& where() const { return where_; }
  // Gives `name`'s memory back (release_pages) once a model holds its own copy; get() of it
  // fails from then on. Returns the bytes released.
  size_t release(const std::string& name);

 private:
  std::string where_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
  ReleasedTensors released_;
};

// Writes tensors to a safetensors file (for tests, synthetic checkpoints and exports).
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The same file written one tensor at a time: the header comes from the shapes, then
// `bytes_of(i)` produces tensor i just before it is written, so a checkpoint larger than memory
// (a widened model) never has to be held whole. Each result must be exactly the shape's size.
struct TensorHeader {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
void write_safetensors_streamed(const std::string& path, const std::vector<TensorHeader>& headers,
                                const std::function<std::string(size_t)>& bytes_of,
                                const std::map<std::string, std::string>& metadata = {});

}  // namespace eaglet
