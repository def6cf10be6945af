#include "backend/cpu/bf16_products_choice.h"

#include "backend/cpu/bf16_convert.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/linear_amx.h"
#include "backend/cpu/onednn_matmul.h"
#include "core/half.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

namespace lingbot::cpu {

namespace {

// The best of three timed runs after one untimed (oneDNN makes its
// primitive, sgemm its buffers, on the first).
template <class F>
double best_ms(F&& run) {
  run();
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

Bf16ProductsChoice measure_bf16_products() {
  // A frame's product in miniature: rows x 1024 -> 1024, bf16 in and out.
  constexpr int64_t kRows = 256, kIn = 1024, kOut = 1024;
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<uint16_t> x(kRows * kIn), w(kOut * kIn), out(kRows * kOut);
  for (uint16_t& v : x) v = f32_to_bf16(d(rng));
  for (uint16_t& v : w) v = f32_to_bf16(d(rng));

  Bf16ProductsChoice c;
  c.measured = true;
  OnednnMatmuls matmuls;
  c.onednn_ms = best_ms([&] {
    matmuls.run({kRows, kIn, kOut}, DType::BF16, x.data(), w.data(), nullptr, Activation::None, MatmulDst::Bf16,
                out.data());
  });
  // The widened kernel as CpuBackend::linear_bf16 runs it: x and w widened,
  // sgemm, the output rounded.
  std::vector<float> xf(x.size()), wf(w.size()), yf(out.size());
  c.widened_ms = best_ms([&] {
    f32_from_bf16(x.data(), xf.data(), kRows * kIn);
    f32_from_bf16(w.data(), wf.data(), kOut * kIn);
    gemm_abt(kRows, kOut, kIn, xf.data(), kIn, wf.data(), kIn, yf.data(), kOut);
    bf16_from_f32(yf.data(), out.data(), kRows * kOut);
  });
  c.products = c.onednn_ms * kOnednnBf16Margin < c.widened_ms ? Bf16Products::OnednnBf16 : Bf16Products::WidenedSgemm;
  c.reason = fmt::format("measured here: oneDNN {:.2f} ms, widened {:.2f} ms", c.onednn_ms, c.widened_ms);
  return c;
}

const Bf16ProductsChoice& bf16_products_choice() {
  static const Bf16ProductsChoice choice = [] {
    Bf16ProductsChoice c;
    if (linear_amx_available()) {
      c.products = Bf16Products::AmxTiles;
      c.reason = "AMX";
    } else if (cpu_has_amx_bf16()) {  // a build without our tile kernel
      c.products = Bf16Products::OnednnBf16;
      c.reason = "AMX";
    } else if (!cpu_has_bf16_arithmetic()) {
      c.products = Bf16Products::WidenedSgemm;
      c.reason = "no AVX512-BF16";
    } else {
      c = measure_bf16_products();
    }
    return c;
  }();
  return choice;
}

}  // namespace lingbot::cpu
