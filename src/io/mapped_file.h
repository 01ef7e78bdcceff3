// A read-only memory-mapped file: checkpoints are mapped, never copied, so a model loads in
// milliseconds and only the pages a forward touches are read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

namespace eaglet {

// Where the tensor data of a file read into memory starts. Safetensors only aligns to 8 bytes:
// a tensor starting mid cache line splits every 64-byte load in two (~10% of decode speed), and
// one starting mid page makes every 4 KB weight row (hidden 2048, BF16) straddle two pages, where
// the hardware prefetchers stop (~12% more). Tensor sizes are nearly always multiples of 4 KB,
// so a page-aligned payload start aligns the tensors after it as well.
inline constexpr size_t kWeightAlignment = 4096;

class MappedFile {
 public:
  // When the file is read into memory, the byte at `aligned_offset` lands on a kWeightAlignment
  // boundary (a mapping keeps the file's own alignment).
  explicit MappedFile(const std::string& path, size_t aligned_offset = 0);
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
  void* data_ = nullptr;  // the file's first byte
  void* region_ = nullptr;  // what was mapped (data_ minus the alignment shift)
  size_t size_ = 0, region_size_ = 0;
};

// Gives the pages wholly inside [p, p + n) of a mapping back to the system (the bytes of a
// tensor that was copied at load). A file mapping reads them again from the page cache if they
// are touched; memory a file was read into reads zeros: so only for bytes nothing reads again.
// Returns the bytes released.
size_t release_pages(const void* p, size_t n);

// The tensors of one file whose bytes were released once a model copied them: reading one again
// is an internal error, named here (checked by the readers of safetensors and GGUF weights).
class ReleasedTensors {
 public:
  size_t release(const std::string& name, const void* p, size_t n) {
    names_.insert(name);
    return release_pages(p, n);
  }
  // Fails naming `where` and `name` when `name` was released.
  void check(const std::string& where, const std::string& name) const;

 private:
  std::set<std::string> names_;
};

// Whole-file reads for small text files; `.gz` files are inflated with zlib.
std::string read_text_file(const std::string& path);
// Fails naming `path` when it exists but is not a regular file (a FIFO would block a reader
// forever, a device never end).
void require_regular_file(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace eaglet
