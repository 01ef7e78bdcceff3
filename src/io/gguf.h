// GGUF files (llama.cpp's model format, version 2 and 3): the key/value metadata, and the tensor
// directory with each tensor's type, shape and bytes in the (mapped) file. Everything is checked
// against the file before use: a truncated file, a tensor past the end, a misaligned offset, a
// shape that is not whole blocks or an unknown type fails naming the file and the tensor.
//
// Shapes are kept in GGUF order: dims[0] is the innermost (contiguous) dimension, so a weight
// matrix [out, in] of PyTorch is dims {in, out} here.
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/mapped_file.h"

namespace eaglet {

struct GgufTensor {
  std::string name;
  uint32_t type = 0;           // ggml type id (kernels/ggml_quant.h)
  std::vector<int64_t> dims;   // innermost first
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t rows() const;        // product of dims[1..]
  int64_t cols() const { return dims.empty() ? 0 : dims[0]; }
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  const std::string& path() const { return file_->path(); }
  const nlohmann::json& metadata() const { return meta_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find(const std::string& name) const;
  const GgufTensor& get(const std::string& name) const;  // throws naming the tensor and file

 private:
  std::unique_ptr<MappedFile> file_;
  nlohmann::json meta_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_
};

// The metadata alone (vocabulary-only files; the tokenizer reads these).
nlohmann::json read_gguf_metadata(const std::string& path);

}  // namespace eaglet
