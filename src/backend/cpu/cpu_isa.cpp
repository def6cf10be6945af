#include "backend/cpu/cpu_isa.h"

#include "core/error.h"

#include <oneapi/dnnl/dnnl.h>

#include <atomic>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace lingbot::cpu {

const char* isa_name(Isa isa) { return isa == Isa::Avx512 ? "avx512" : "avx2"; }

bool cpu_supports(Isa isa) {
#if defined(__x86_64__)
  // GCC's CPUID reader also checks that the OS saves the wider registers (XCR0).
  switch (isa) {
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
#endif
  return false;
}

bool amx_bf16_granted() {
  static const bool granted = [] {
#if defined(__x86_64__) && defined(__linux__)
    if (!cpu_supports(Isa::Avx512) || !__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
        !__builtin_cpu_supports("avx512bf16")) {
      return false;
    }
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

Isa resolve_isa(std::string_view choice) {
  if (choice == "auto") return cpu_supports(Isa::Avx512) ? Isa::Avx512 : Isa::Avx2;
  LB_CHECK(choice == "avx2" || choice == "avx512", "--cpu-isa {}: expected auto, avx2 or avx512", choice);
  const Isa isa = choice == "avx2" ? Isa::Avx2 : Isa::Avx512;
  LB_CHECK(cpu_supports(isa), "--cpu-isa {}: this CPU does not support {}", choice,
           isa == Isa::Avx2 ? "AVX2 with FMA and F16C" : "AVX-512 (F, BW, DQ and VL)");
  return isa;
}

namespace {
std::atomic<int> g_isa_in_use{-1};  // -1: not set yet
}  // namespace

void use_isa(Isa isa) { g_isa_in_use.store(static_cast<int>(isa)); }

Isa isa_in_use() {
  const int isa = g_isa_in_use.load();
  return isa < 0 ? resolve_isa("auto") : static_cast<Isa>(isa);
}

void limit_onednn_to(Isa isa) {
  // dnnl_set_max_cpu_isa fails (harmlessly) once oneDNN has chosen its kernels.
  if (isa == Isa::Avx2) dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
}

}  // namespace lingbot::cpu
