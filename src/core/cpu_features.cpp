#include "core/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/thread_pool.h"

namespace eaglet {

Isa best_supported_isa() {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512) {
#if defined(__GNUC__) && __GNUC__ >= 12
    if (__builtin_cpu_supports("avx512bf16")) return Isa::Avx512Bf16;
#endif
    return Isa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
  return Isa::Scalar;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512bf16";
  }
  return "?";
}

bool parse_isa(const char* s, Isa* out) {
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16})
    if (std::strcmp(s, isa_name(i)) == 0) { *out = i; return true; }
  return false;
}

namespace {
Isa initial_isa() {
  Isa best = best_supported_isa();
  if (const char* env = std::getenv("EAGLET_ISA")) {
    Isa want;
    if (parse_isa(env, &want) && int(want) < int(best)) return want;
  }
  return best;
}
std::atomic<int> g_isa{int(initial_isa())};
}  // namespace

Isa active_isa() { return Isa(g_isa.load(std::memory_order_relaxed)); }

void set_active_isa(Isa isa) {
  Isa best = best_supported_isa();
  g_isa.store(int(int(isa) > int(best) ? best : isa));
}

std::string cpu_description() {
  std::string model = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + " (" + std::to_string(ThreadPool::default_threads()) + " cores, " + isa_name(active_isa()) + ")";
}

}  // namespace eaglet
