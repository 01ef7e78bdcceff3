// CPU features, detected from cpuid and XCR0, agree with what Linux reports in /proc/cpuinfo
// (which the kernel also filters by the state it saves), feature by feature; the kernel ladder
// follows from them; and AMX is granted only where the CPU has it, with a reason where not.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/cpu_features.h"

namespace eaglet {
namespace {

std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0 && line.find(':') != std::string::npos) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> out;
      for (std::string w; words >> w;) out.insert(w);
      return out;
    }
  return {};
}

TEST(CpuFeatures, AgreeWithProcCpuinfo) {
  const std::set<std::string> flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags line on this system";
  std::set<std::string> detected;
  std::istringstream names(cpu_features().names());
  for (std::string w; names >> w;) detected.insert(w);
  for (const char* f : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_vnni",
                        "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"})
    EXPECT_EQ(detected.count(f), flags.count(f)) << f << ": cpuid says " << (detected.count(f) ? "yes" : "no")
                                                 << ", /proc/cpuinfo says " << (flags.count(f) ? "yes" : "no");
  std::printf("features: %s\n", cpu_features().names().c_str());
}

TEST(CpuFeatures, TheKernelLadderFollowsTheFeatures) {
  const CpuFeatures& f = cpu_features();
  const Isa best = best_supported_isa();
  EXPECT_EQ(best >= Isa::Avx2, f.avx2 && f.fma);
  EXPECT_EQ(best >= Isa::Avx512, f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
  EXPECT_EQ(best >= Isa::Avx512Bf16, best >= Isa::Avx512 && f.avx512_bf16);
  EXPECT_EQ(best == Isa::Amx, best >= Isa::Avx512Bf16 && f.amx_tile && f.amx_bf16 && request_amx(nullptr));
}

TEST(CpuFeatures, AmxIsRequestedOnlyWhereItExists) {
  std::string why;
  const bool granted = request_amx(&why);
  if (!cpu_features().amx_tile) {
    EXPECT_FALSE(granted);
    EXPECT_NE(why.find("amx_tile"), std::string::npos) << why;
  } else {
    EXPECT_TRUE(granted || why.find("arch_prctl") != std::string::npos) << why;  // refused: said so
  }
  std::string again;
  EXPECT_EQ(request_amx(&again), granted);  // asked once; the answer stays
  EXPECT_EQ(again, why);
}

}  // namespace
}  // namespace eaglet
