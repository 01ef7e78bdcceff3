#include "core/cpu_features.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <utility>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <spdlog/spdlog.h>

#include "core/thread_pool.h"

namespace eaglet {

namespace {
#if defined(__x86_64__)
struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};
Regs cpuid(uint32_t leaf, uint32_t sub) {
  Regs r;
  if (__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) return r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}
bool bit(uint32_t v, int i) { return (v >> i) & 1u; }

CpuFeatures detect() {
  CpuFeatures f;
  const Regs l1 = cpuid(1, 0), l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  // Register state the OS saves on a context switch (XCR0): without it the instructions fault.
  uint64_t xcr0 = 0;
  if (bit(l1.c, 27)) {  // OSXSAVE
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t(hi) << 32) | lo;
  }
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe0) == 0xe0, tiles = (xcr0 & 0x60000) == 0x60000;
  f.fma = ymm && bit(l1.c, 12);
  f.f16c = ymm && bit(l1.c, 29);
  f.avx2 = ymm && bit(l7.b, 5);
  f.avx512f = zmm && bit(l7.b, 16);
  f.avx512dq = zmm && bit(l7.b, 17);
  f.avx512bw = zmm && bit(l7.b, 30);
  f.avx512vl = zmm && bit(l7.b, 31);
  f.avx512_vnni = zmm && bit(l7.c, 11);
  f.avx512_vbmi = zmm && bit(l7.c, 1);
  f.avx512_bf16 = zmm && bit(l7s1.a, 5);
  f.avx_vnni = ymm && bit(l7s1.a, 4);
  f.amx_bf16 = tiles && bit(l7.d, 22);
  f.amx_tile = tiles && bit(l7.d, 24);
  f.amx_int8 = tiles && bit(l7.d, 25);
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string CpuFeatures::names() const {
  std::string out;
  const std::pair<bool, const char*> all[] = {
      {avx2, "avx2"}, {fma, "fma"}, {f16c, "f16c"}, {avx512f, "avx512f"}, {avx512bw, "avx512bw"},
      {avx512vl, "avx512vl"}, {avx512dq, "avx512dq"}, {avx512_bf16, "avx512_bf16"}, {avx512_vnni, "avx512_vnni"}, {avx512_vbmi, "avx512vbmi"},
      {avx_vnni, "avx_vnni"}, {amx_tile, "amx_tile"}, {amx_bf16, "amx_bf16"}, {amx_int8, "amx_int8"}};
  for (const auto& [has, name] : all)
    if (has) out += (out.empty() ? "" : " ") + std::string(name);
  return out;
}

bool request_amx(std::string* why) {
  static const std::pair<bool, std::string> granted = [] () -> std::pair<bool, std::string> {
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile) return {false, "this CPU (or the OS) has no amx_tile"};
#if defined(__x86_64__) && defined(__linux__)
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;  // asm/prctl.h, the XTILEDATA state component
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) != 0)
      return {false, std::string("the kernel refused AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ") + std::strerror(errno) +
                         "; Linux 5.16 or later grants it)"};
    return {true, ""};
#else
    return {false, "AMX needs Linux on x86-64"};
#endif
  }();
  if (why) *why = granted.second;
  return granted.first;
}

Isa best_supported_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) {
    if (!f.avx512_bf16) return Isa::Avx512;
    if (!f.amx_tile || !f.amx_bf16) return Isa::Avx512Bf16;
    std::string why;
    if (request_amx(&why)) return Isa::Amx;
    static std::once_flag logged;
    std::call_once(logged, [&] { spdlog::warn("AMX unavailable ({}): running the avx512bf16 kernels", why); });
    return Isa::Avx512Bf16;
  }
  if (f.avx2 && f.fma) return Isa::Avx2;
  return Isa::Scalar;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512bf16";
    case Isa::Amx: return "amx";
  }
  return "?";
}

bool parse_isa(const char* s, Isa* out) {
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Bf16, Isa::Amx})
    if (std::strcmp(s, isa_name(i)) == 0) { *out = i; return true; }
  return false;
}

namespace {
Isa initial_isa() {
  Isa best = best_supported_isa();
  if (const char* env = std::getenv("EAGLET_ISA")) {
    Isa want;
    if (parse_isa(env, &want)) {
      if (int(want) <= int(best)) return want;
      spdlog::warn("EAGLET_ISA={}: this CPU cannot run it; running {}", env, isa_name(best));
    } else if (std::strcmp(env, "amx-model") != 0) {  // the kernels' tile model (kernels/isa_table.h)
      spdlog::warn("EAGLET_ISA={} is not one of scalar, avx2, avx512, avx512bf16, amx, amx-model: ignored", env);
    }
  }
  return best;
}
// Chosen at the first use, not at static initialisation: its warnings must go to the log main()
// sets up (stderr), not to a default logger on stdout ahead of a command's JSON.
std::atomic<int> g_isa{-1};
}  // namespace

Isa active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    static std::once_flag chosen;
    std::call_once(chosen, [] {
      int unset = -1;
      g_isa.compare_exchange_strong(unset, int(initial_isa()));  // unless set_active_isa came first
    });
    v = g_isa.load(std::memory_order_relaxed);
  }
  return Isa(v);
}

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
