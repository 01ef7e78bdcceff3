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

#include "core/error.h"

namespace eaglet {

namespace {
bool g_read_into_memory = false;

void* read_whole_file(int fd, size_t size, const std::string& path) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return p;
  ::madvise(p, size, MADV_HUGEPAGE);
  for (size_t off = 0; off < size;) {
    const ssize_t n = ::pread(fd, static_cast<uint8_t*>(p) + off, std::min<size_t>(size - off, size_t(1) << 30), off_t(off));
    if (n <= 0) {
      ::munmap(p, size);
      fail("{}: read failed at byte {}: {}", path, off, n < 0 ? std::strerror(errno) : "unexpected end of file");
    }
    off += size_t(n);
  }
  ::mprotect(p, size, PROT_READ);
  return p;
}
}  // namespace

void MappedFile::set_read_into_memory(bool read) { g_read_into_memory = read; }

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(errno));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    data_ = g_read_into_memory ? read_whole_file(fd, size_, path) : ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (data_ == MAP_FAILED) {
      ::close(fd);
      data_ = nullptr;
      fail("{}: cannot mmap: {}", path, std::strerror(errno));
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string read_text_file(const std::string& path) {
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
