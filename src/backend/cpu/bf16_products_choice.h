// Which kernel the bf16 mode's products take on this CPU (Bf16Products).
//
// With AMX, our kernel on the tiles (linear_amx.h); without AVX512-BF16, the
// weights widened to sgemm. In between, AVX512-BF16 without AMX, the instruction set does
// not tell: some cores issue its bf16 dot products at half an FMA's rate,
// where oneDNN's bf16 products run at 0.5-0.6x of sgemm's speed, and others
// at the full rate (AMD Zen 4), where they run twice as fast as sgemm
// (docs/PERF.md, "The bf16 mode"). There a short measurement decides, once
// per process: a 256 x 1024 x 1024 product both ways, and oneDNN's only
// where it is clearly faster.
#pragma once

#include "backend/cpu/cpu_backend.h"

#include <string>

namespace lingbot::cpu {

struct Bf16ProductsChoice {
  Bf16Products products = Bf16Products::WidenedSgemm;
  bool measured = false;           // AVX512-BF16 without AMX: the times below decided
  double onednn_ms = 0, widened_ms = 0;  // the best of three runs of each
  std::string reason;              // for the run header: "AMX", "no AVX512-BF16", the times
};

// oneDNN's products are taken on a measurement only when at least this much
// faster: the two kernels give the same results to float32 rounding, but a
// choice that flips between runs on a loaded machine would be a nuisance.
constexpr double kOnednnBf16Margin = 1.25;

// The choice for this CPU, made on the first call (with the OpenMP thread
// count in force then) and kept for the process.
const Bf16ProductsChoice& bf16_products_choice();

// The measurement itself (on the threads in force): what the first call of
// bf16_products_choice() runs on a CPU with AVX512-BF16 and no AMX.
Bf16ProductsChoice measure_bf16_products();

}  // namespace lingbot::cpu
