// The run-time choice of instruction set (backend/cpu/cpu_isa.h): what
// --cpu-isa accepts and refuses, and that a backend made with one uses it.
#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"

#include <gtest/gtest.h>

using namespace lingbot;
using namespace lingbot::cpu;

TEST(CpuIsa, AutoIsTheBestTheCpuSupports) {
  ASSERT_TRUE(cpu_supports(Isa::Avx2)) << "the build's baseline";
  EXPECT_EQ(resolve_isa("auto"), cpu_supports(Isa::Avx512) ? Isa::Avx512 : Isa::Avx2);
  EXPECT_EQ(resolve_isa("avx2"), Isa::Avx2);
  if (cpu_supports(Isa::Avx512)) {
    EXPECT_EQ(resolve_isa("avx512"), Isa::Avx512);
  }
}

TEST(CpuIsa, UnknownOrUnsupportedChoicesAreErrorsNamingTheFlag) {
  for (const char* bad : {"sse4", "AVX2", "", "avx512 "}) {
    try {
      resolve_isa(bad);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--cpu-isa"), std::string::npos) << e.what();
    }
  }
  if (!cpu_supports(Isa::Avx512)) {
    EXPECT_THROW(resolve_isa("avx512"), Error);
  }
}

TEST(CpuIsa, ABackendUsesItsIsaAndNamesItsKernels) {
  for (const Isa isa : {Isa::Avx512, Isa::Avx2}) {  // AVX-512 first: see parity_test.cpp's ParityIsa
    if (!cpu_supports(isa)) continue;
    auto backend = make_cpu_backend(1, isa_name(isa));
    EXPECT_EQ(isa_in_use(), isa);
    const std::string name = backend->name();
    EXPECT_NE(name.find(std::string("own kernels ") + isa_name(isa)), std::string::npos) << name;
    EXPECT_NE(name.find("oneDNN"), std::string::npos) << name;
  }
}
