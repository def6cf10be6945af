// Experiment: what do this machine's AMX tiles deliver, per core and over
// all cores, before any GEMM library is involved? oneDNN 2.6's bf16 matmuls
// reach 2.3-2.7 TFLOP/s on the GPU machine's 16 CPUs, which is near what
// AVX512-BF16 alone could give; this separates "AMX is slow here (the VM
// saves tile state, throttles, or traps)" from "the library leaves AMX idle".
//
// Two loops per thread, each 4 accumulator tiles of 16 x 16 float32:
//   registers: tdpbf16ps on operand tiles loaded once (the tile unit's peak);
//   l1:        2 A + 2 B tiles loaded from a 4 KiB L1-resident block before
//              every 4 products (a GEMM micro-kernel's inner step).
//
//   g++ -O2 -std=c++20 -mamx-tile -mamx-bf16 -fopenmp dev/cpu/amx_peak.cpp -o /tmp/amx_peak
//   /tmp/amx_peak [threads...]
#include "amx_tiles.h"

#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// One thread's loop; returns the products' FLOPs done. With `from_l1`
// the operand tiles are loaded again before every 4 products.
double run(int64_t steps, bool from_l1) {
  configure_tiles();
  alignas(64) static thread_local uint16_t block[4][16 * 32];
  for (auto& b : block)
    for (auto& v : b) v = 0x3f80;  // 1.0 in bf16
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto load = [] {
    _tile_loadd(4, block[0], 64);
    _tile_loadd(5, block[1], 64);
    _tile_loadd(6, block[2], 64);
    _tile_loadd(7, block[3], 64);
  };
  load();
  for (int64_t s = 0; s < steps; ++s) {
    if (from_l1) load();
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) static thread_local float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  if (out[0] < 0) std::puts("");  // keep the loop
  return 4.0 * steps * 16 * 16 * 32 * 2;
}

double tflops(int threads, bool l1, int64_t steps) {
  double flops = 0;
  const auto a = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  flops += run(steps, l1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  return flops / s * 1e-12;
}

}  // namespace

int main(int argc, char** argv) {
  if (!request_amx()) return 1;
  std::vector<int> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
  if (counts.empty()) counts = {1, 2, 4, 8, 16};
  const int64_t steps = 2'000'000;  // 4 x 16 x 16 x 32 x 2 FLOP each: ~0.26 TFLOP per thread
  for (int t : counts) {
    tflops(t, false, steps / 20);  // warm-up (and the tile state's first use)
    std::printf("threads %2d: registers %.2f TFLOP/s, l1 %.2f TFLOP/s\n", t, tflops(t, false, steps),
                tflops(t, true, steps));
  }
}
