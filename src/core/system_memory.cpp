#include "core/system_memory.h"

#include <cstdio>
#include <cstring>

namespace eaglet {

namespace {
// The "<key>: <n> kB" line of a /proc file, in bytes.
int64_t proc_kb_field(const char* path, const char* key) {
  FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  char line[256];
  int64_t kb = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      long long v = 0;
      if (std::sscanf(line + n + 1, "%lld", &v) == 1) kb = v;
      break;
    }
  std::fclose(f);
  return kb * 1024;
}
}  // namespace

int64_t available_memory_bytes() { return proc_kb_field("/proc/meminfo", "MemAvailable"); }
int64_t resident_memory_bytes() { return proc_kb_field("/proc/self/status", "VmRSS"); }

}  // namespace eaglet
