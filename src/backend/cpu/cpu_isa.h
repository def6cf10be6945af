// Which instruction set the CPU path's own kernels use, chosen at run time
// from the CPU's features (CPUID), so that one binary is fast on AVX2-only
// and on AVX-512 machines alike.
//
// Our kernels (attention first) are built once per ISA (the *_avx512.cpp
// files get AVX-512 code generation, src/CMakeLists.txt) and each CPU backend
// calls the set of its ISA. The option cpu_isa (--cpu-isa auto|avx2|avx512)
// forces one, so that tests run the parity suites on each path; a forced ISA
// the CPU lacks is an error, never a silent fallback. oneDNN dispatches its
// own kernels on CPUID; a backend forced to AVX2 caps it at AVX2 too where
// it has not run yet (its ceiling is process-wide and set once; the run
// header names the ISA it actually uses).
#pragma once

#include <string_view>

namespace lingbot::cpu {

enum class Isa {
  Avx2,    // AVX2 + FMA + F16C: the build's baseline (x86-64 CPUs since 2013-2015)
  Avx512,  // AVX-512 F/BW/DQ/VL (Skylake-SP and later, Zen 4 and later)
};

const char* isa_name(Isa isa);  // "avx2", "avx512"

// Whether this CPU (and its operating system) can run code of that ISA.
bool cpu_supports(Isa isa);

// Whether this CPU has AMX-BF16 tiles (with AVX-512 and AVX512-BF16, which
// every such CPU has) and Linux grants this process the tile state, which it
// hands out only on request (arch_prctl, Linux 5.16 and later; asked once).
// Our tile kernels (attention, Linear products) run only where it holds.
bool amx_bf16_granted();

// The ISA for a cpu_isa option value: "auto" (the best this CPU supports),
// "avx2" or "avx512". Throws lingbot::Error naming --cpu-isa for an unknown
// value or an ISA this CPU lacks.
Isa resolve_isa(std::string_view choice);

// The ISA our kernels use, process-wide like OpenMP's thread count: each CPU
// backend sets its own when made (the last one made wins). Until then, the
// best this CPU supports.
void use_isa(Isa isa);
Isa isa_in_use();

// Caps oneDNN at AVX2 when isa is Avx2 (a no-op once oneDNN has dispatched).
void limit_onednn_to(Isa isa);

}  // namespace lingbot::cpu
