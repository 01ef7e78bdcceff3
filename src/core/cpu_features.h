// Which SIMD level the kernels run at: the best the CPU has, or a lower one forced with
// EAGLET_ISA=scalar|avx2|avx512|avx512bf16|amx (for testing and for benchmarks).
#pragma once
#include <string>

namespace eaglet {

// Amx: avx512bf16 plus AMX tiles (BF16) the kernel has granted this process.
enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3, Amx = 4 };

// What this CPU and the OS let a process run, feature by feature (cpuid, with XCR0 for the
// register state the OS saves): kernels are picked by what each needs, not by a rung of a ladder
// (an AMD Zen 4 has AVX-512 BF16 and VNNI but no AMX; an Intel Xeon has AMX as well).
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx_vnni = false, avx512_vbmi = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  // The features present, named as /proc/cpuinfo's flags name them ("avx2 fma f16c ...").
  std::string names() const;
};
const CpuFeatures& cpu_features();  // detected once

// AMX tile data needs the kernel's leave per process (Linux >= 5.16: arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA), asked once. False, with the reason in `why`, when the CPU
// has no AMX or the kernel refuses: the caller then logs it and runs the vector kernels.
bool request_amx(std::string* why);

Isa best_supported_isa();
Isa active_isa();
void set_active_isa(Isa isa);  // clamped to what the CPU supports
const char* isa_name(Isa isa);
bool parse_isa(const char* s, Isa* out);
// "AMD EPYC 7B13 (2 cores, avx2)": /proc/cpuinfo's model name, the cores this process may use and
// the active kernels, so a printed figure says which machine it came from.
// (cpu_features().names() lists the rest.)
std::string cpu_description();

}  // namespace eaglet
