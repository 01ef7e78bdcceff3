// Which SIMD level the kernels run at: the best the CPU has, or a lower one forced with
// EAGLET_ISA=scalar|avx2|avx512|avx512bf16 (for testing and for benchmarks).
#pragma once
#include <string>

namespace eaglet {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3 };

Isa best_supported_isa();
Isa active_isa();
void set_active_isa(Isa isa);  // clamped to what the CPU supports
const char* isa_name(Isa isa);
bool parse_isa(const char* s, Isa* out);
// "AMD EPYC 7B13 (2 cores, avx2)": /proc/cpuinfo's model name, the cores this process may use and
// the active kernels, so a printed figure says which machine it came from.
std::string cpu_description();

}  // namespace eaglet
