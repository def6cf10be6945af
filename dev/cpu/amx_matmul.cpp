// Experiment: a Linear layer's product y = x W^T on AMX tiles, written
// directly, against oneDNN 2.6's bf16 matmul on the model's shapes. The AMX
// unit alone delivers 7.5 TFLOP/s on 16 cores when its operands come from
// L1 (amx_peak.cpp) while oneDNN's matmul reaches 2.3-2.7 TFLOP/s there;
// this measures how much of the gap a plain tiled kernel closes.
//
// The kernel and its layouts: amx_linear_plain.h.
//
//   g++ -O2 -std=c++20 -mamx-tile -mamx-bf16 -fopenmp dev/cpu/amx_matmul.cpp -ldnnl -o /tmp/amx_matmul
//   OMP_NUM_THREADS=16 /tmp/amx_matmul
#include "amx_linear_plain.h"
#include "amx_tiles.h"
#include "median_time.h"
#include "onednn_bf16_linear.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using amx_plain::amx_linear;
using amx_plain::from_bf16;
using amx_plain::pack_weights;
using amx_plain::to_bf16;

}  // namespace

int main() {
  if (!request_amx()) return 1;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int shapes[][3] = {{978, 1024, 3072},  {978, 1024, 1024},  {978, 1024, 4096},  {978, 4096, 1024},
                           {7824, 1024, 3072}, {7824, 1024, 1024}, {7824, 1024, 4096}, {7824, 4096, 1024}};
  std::printf("%d threads\n", omp_get_max_threads());
  for (const auto& s : shapes) {
    const int m = s[0], k = s[1], n = s[2];
    const int mp = (m + 31) / 32 * 32;
    std::vector<uint16_t> x(static_cast<size_t>(mp) * k, 0), w(static_cast<size_t>(n) * k);
    for (size_t i = 0; i < static_cast<size_t>(m) * k; ++i) x[i] = to_bf16(normal(rng));
    for (auto& v : w) v = to_bf16(normal(rng) * 0.03f);
    const std::vector<uint16_t> packed = pack_weights(w, n, k);
    std::vector<float> y(static_cast<size_t>(mp) * n), y_dnnl(static_cast<size_t>(m) * n);

    const double ours = median_ms([&] { amx_linear(x.data(), packed.data(), y.data(), mp, n, k); });

    // oneDNN: float32 out, and the model's bf16 out with a bias.
    const OnednnLinearTimes t_dnnl = time_onednn_bf16_linear(x.data(), w.data(), m, k, n, y_dnnl.data());
    const double theirs = t_dnnl.f32_out_ms, bf16_out = t_dnnl.bf16_out_bias_ms;
    std::printf("  oneDNN, bf16 out + bias: %s %7.3f ms (%5.2f TFLOP/s)\n", t_dnnl.impl.c_str(), bf16_out,
                2.0 * m * n * k / bf16_out * 1e-9);

    // Both against a float64 product of the same bf16 values (every 7th row).
    const double worst = amx_plain::max_error_vs_float64(x, w, y.data(), m, n, k, 7);
    const double worst_dnnl = amx_plain::max_error_vs_float64(x, w, y_dnnl.data(), m, n, k, 7);
    const double flop = 2.0 * m * n * k;
    std::printf("%5d x %4d -> %4d: AMX tiles %7.3f ms (%5.2f TFLOP/s), oneDNN %s %7.3f ms (%5.2f TFLOP/s); "
                "max error / sum|products|: %.1e, oneDNN %.1e\n",
                m, k, n, ours, flop / ours * 1e-9, t_dnnl.impl.c_str(), theirs, flop / theirs * 1e-9, worst,
                worst_dnnl);
    std::fflush(stdout);
  }
}
