#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/aligned_bytes.h"
#include "core/error.h"

namespace eaglet {

namespace {
bool g_read_into_memory = false;

// Reads the file into a fresh anonymous region of `region_size` bytes, starting `shift` bytes in.
void* read_whole_file(int fd, size_t size, size_t shift, size_t region_size, const std::string& path) {
  void* p;
  try {
    p = map_huge(region_size);
  } catch (const std::bad_alloc&) {
    return MAP_FAILED;
  }
  uint8_t* dst = static_cast<uint8_t*>(p) + shift;
  for (size_t off = 0; off < size;) {
    const ssize_t n = ::pread(fd, dst + off, std::min<size_t>(size - off, size_t(1) << 30), off_t(off));
    if (n <= 0) {
      unmap_huge(p, region_size);
      fail("{}: read failed at byte {}: {}", path, off, n < 0 ? std::strerror(errno) : "unexpected end of file");
    }
    off += size_t(n);
  }
  ::mprotect(p, region_size, PROT_READ);
  return p;
}
}  // namespace

void MappedFile::set_read_into_memory(bool read) { g_read_into_memory = read; }

MappedFile::MappedFile(const std::string& path, size_t aligned_offset) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer forever; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    size_t shift = 0;
    region_size_ = size_;
    if (g_read_into_memory) {
      shift = (kWeightAlignment - aligned_offset % kWeightAlignment) % kWeightAlignment;
      region_size_ = size_ + shift;
      region_ = read_whole_file(fd, size_, shift, region_size_, path);
    } else {
      region_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    }
    if (region_ == MAP_FAILED) {
      ::close(fd);
      region_ = nullptr;
      fail("{}: cannot mmap: {}", path, std::strerror(errno));
    }
    data_ = static_cast<uint8_t*>(region_) + shift;
  }
  ::close(fd);
}

size_t release_pages(const void* p, size_t n) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(p) + page - 1) & ~(page - 1), end = (uintptr_t(p) + n) & ~(page - 1);
  if (end <= begin || ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
  return end - begin;
}

void ReleasedTensors::check(const std::string& where, const std::string& name) const {
  if (names_.count(name))
    fail("{}: tensor '{}' was read after the model released its memory (internal error)", where, name);
}

MappedFile::~MappedFile() {
  if (region_) ::munmap(region_, region_size_);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void require_regular_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
}

std::string read_text_file(const std::string& path) {
  require_regular_file(path);
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) fail("{}: cannot open", path);
    std::string out;
    char buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
    const bool bad = n < 0;
    gzclose(f);
    if (bad) fail("{}: corrupt gzip data", path);
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace eaglet
