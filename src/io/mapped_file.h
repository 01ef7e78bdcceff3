// A read-only memory-mapped file: checkpoints are mapped, never copied, so a model loads in
// milliseconds and only the pages a forward touches are read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace eaglet {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Files opened from now on are read into anonymous memory (huge pages where the kernel allows)
  // instead of being mapped, like llama.cpp's --no-mmap. Page-cache mappings are slow to stream
  // on some virtual machines; the price is reading every byte (every MoE expert) at load.
  static void set_read_into_memory(bool read);

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Whole-file reads for small text files; `.gz` files are inflated with zlib.
std::string read_text_file(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace eaglet
