// Experiment: a Linear layer's product y = x W^T on AMX tiles, written
// directly, against oneDNN 2.6's bf16 matmul on the model's shapes. The AMX
// unit alone delivers 7.5 TFLOP/s on 16 cores when its operands come from
// L1 (amx_peak.cpp) while oneDNN's matmul reaches 2.3-2.7 TFLOP/s there;
// this measures how much of the gap a plain tiled kernel closes.
//
//   x [M, K] bf16 row-major (the activations as the model holds them),
//   W [N, K] bf16 row-major (a Linear weight), packed once into the tiles'
//   layout: tile (nb, kb) holds W[nb*16 + c][kb*32 + 2r + p] at [r][c][p]
//   (16 rows of 16 column pairs, 1 KiB), the "VNNI" order tdpbf16ps reads;
//   y [M, N] float32.
// Each work item is a 128 x 128 block of y; its 32 x 32 steps keep 4
// accumulator tiles, load 2 tiles of x straight from the row-major
// activations and 2 of W per 32 of K. M is padded to a multiple of 32.
//
//   g++ -O2 -std=c++20 -mamx-tile -mamx-bf16 -fopenmp dev/cpu/amx_matmul.cpp -ldnnl -o /tmp/amx_matmul
//   OMP_NUM_THREADS=16 /tmp/amx_matmul
#include "amx_tiles.h"
#include "median_time.h"

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

constexpr int kBlockM = 128, kBlockN = 128;

uint16_t to_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

std::vector<uint16_t> pack_weights(const std::vector<uint16_t>& w, int n, int k) {
  std::vector<uint16_t> packed(static_cast<size_t>(n) * k);
  const int kbs = k / 32;
  for (int nb = 0; nb < n / 16; ++nb)
    for (int kb = 0; kb < kbs; ++kb) {
      uint16_t* tile = packed.data() + (static_cast<size_t>(nb) * kbs + kb) * 512;
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
          for (int p = 0; p < 2; ++p)
            tile[(r * 16 + c) * 2 + p] = w[static_cast<size_t>(nb * 16 + c) * k + kb * 32 + 2 * r + p];
    }
  return packed;
}

void amx_linear(const uint16_t* x, const uint16_t* packed, float* y, int m_padded, int n, int k) {
  const int kbs = k / 32;
  const int mblocks = (m_padded + kBlockM - 1) / kBlockM, nblocks = (n + kBlockN - 1) / kBlockN;
#pragma omp parallel
  {
    configure_tiles();
#pragma omp for schedule(static) collapse(2)
    for (int nb = 0; nb < nblocks; ++nb)
      for (int mb = 0; mb < mblocks; ++mb) {
        const int m_end = std::min(m_padded, (mb + 1) * kBlockM), n_end = std::min(n, (nb + 1) * kBlockN);
        for (int m = mb * kBlockM; m < m_end; m += 32)
          for (int j = nb * kBlockN; j < n_end; j += 32) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            const uint16_t* a0 = x + static_cast<size_t>(m) * k;
            const uint16_t* a1 = a0 + static_cast<size_t>(16) * k;
            const uint16_t* b0 = packed + static_cast<size_t>(j / 16) * kbs * 512;
            const uint16_t* b1 = b0 + static_cast<size_t>(kbs) * 512;
            for (int kb = 0; kb < kbs; ++kb) {
              _tile_loadd(4, a0 + kb * 32, k * 2);
              _tile_loadd(5, a1 + kb * 32, k * 2);
              _tile_loadd(6, b0 + static_cast<size_t>(kb) * 512, 64);
              _tile_loadd(7, b1 + static_cast<size_t>(kb) * 512, 64);
              _tile_dpbf16ps(0, 4, 6);
              _tile_dpbf16ps(1, 4, 7);
              _tile_dpbf16ps(2, 5, 6);
              _tile_dpbf16ps(3, 5, 7);
            }
            float* c = y + static_cast<size_t>(m) * n + j;
            _tile_stored(0, c, n * 4);
            _tile_stored(1, c + 16, n * 4);
            _tile_stored(2, c + static_cast<size_t>(16) * n, n * 4);
            _tile_stored(3, c + static_cast<size_t>(16) * n + 16, n * 4);
          }
      }
    _tile_release();
  }
}

}  // namespace

int main() {
  if (!request_amx()) return 1;
  using dnnl::memory;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
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

    // oneDNN: x [M, K] ab, W^T [K, N] read from W [N, K] ("ba"), y float32.
    const memory::desc src({m, k}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc wei({k, n}, memory::data_type::bf16, memory::format_tag::ba);
    const memory::desc dst({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), eng);  // oneDNN 2.x
    const dnnl::matmul mm(pd);
    memory ms(src, eng, x.data()), mw(wei, eng, w.data()), md(dst, eng, y_dnnl.data());
    const double theirs = median_ms([&] {
      mm.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
      strm.wait();
    });

    // oneDNN with the model's output: bfloat16, with a bias.
    const memory::desc dst16({m, n}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc bias({1, n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd16(dnnl::matmul::desc(src, wei, bias, dst16), eng);
    const dnnl::matmul mm16(pd16);
    std::vector<uint16_t> y16(static_cast<size_t>(m) * n);
    std::vector<float> b(static_cast<size_t>(n), 0.5f);
    memory md16(dst16, eng, y16.data()), mb(bias, eng, b.data());
    const double bf16_out = median_ms([&] {
      mm16.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md16}});
      strm.wait();
    });
    std::printf("  oneDNN, bf16 out + bias: %s %7.3f ms (%5.2f TFLOP/s)\n", pd16.impl_info_str(), bf16_out,
                2.0 * m * n * k / bf16_out * 1e-9);

    // Both against a float64 product of the same bf16 values (every 7th row).
    double worst = 0, worst_dnnl = 0;
#pragma omp parallel for reduction(max : worst, worst_dnnl)
    for (int i = 0; i < m; i += 7) {
      for (int j = 0; j < n; ++j) {
        double ref = 0, mag = 0;
        for (int c = 0; c < k; ++c) {
          const double p = static_cast<double>(from_bf16(x[static_cast<size_t>(i) * k + c])) *
                           from_bf16(w[static_cast<size_t>(j) * k + c]);
          ref += p;
          mag += std::fabs(p);
        }
        worst = std::max(worst, std::fabs(y[static_cast<size_t>(i) * n + j] - ref) / mag);
        worst_dnnl = std::max(worst_dnnl, std::fabs(y_dnnl[static_cast<size_t>(i) * n + j] - ref) / mag);
      }
    }
    const double flop = 2.0 * m * n * k;
    std::printf("%5d x %4d -> %4d: AMX tiles %7.3f ms (%5.2f TFLOP/s), oneDNN %s %7.3f ms (%5.2f TFLOP/s); "
                "max error / sum|products|: %.1e, oneDNN %.1e\n",
                m, k, n, ours, flop / ours * 1e-9, pd.impl_info_str(), theirs, flop / theirs * 1e-9, worst,
                worst_dnnl);
    std::fflush(stdout);
  }
}
