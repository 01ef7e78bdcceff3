#include "io/durable_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/error.h"

namespace eaglet {

namespace fs = std::filesystem;

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open to flush: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail("{}: fsync failed: {}", path, std::strerror(err));  // EINVAL: not flushable
}

namespace {
std::string folder_of(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}
}  // namespace

void rename_durably(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) fail("cannot rename {} to {}: {}", from, to, ec.message());
  fsync_path(folder_of(to));
  if (folder_of(from) != folder_of(to)) fsync_path(folder_of(from));
}

void write_file_durably(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", tmp, std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      fail("{}: write failed: {}", tmp, std::strerror(err));
    }
    done += size_t(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) fail("{}: fsync failed: {}", tmp, std::strerror(err));
  rename_durably(tmp, path);
}

void fsync_folder(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) fsync_path(e.path().string());
  fsync_path(dir);
}

void crash_point(const char* name) {
  static const char* spec = std::getenv("EAGLET_CRASH_AT");
  if (!spec || !*spec) return;
  static std::mutex mu;
  static int reached = 0;
  const std::string s(spec);
  const size_t colon = s.find(':');
  if (s.substr(0, colon) != name) return;
  const int nth = colon == std::string::npos ? 1 : std::max(1, std::atoi(s.c_str() + colon + 1));
  std::lock_guard<std::mutex> lk(mu);
  if (++reached == nth) ::kill(::getpid(), SIGKILL);
}

}  // namespace eaglet
