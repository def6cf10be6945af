// Experiment: can a Linear product on AMX tiles beat oneDNN 2.6's bf16
// matmul once its operands come from L1? amx_matmul.cpp's kernel (amx_linear_plain.h, the simple twin)
// loads x's tiles straight from the row-major activations and keeps each
// 32 x 32 block of y in the accumulators over the whole of K, so every
// 4 tile products read 4 KiB from L2 (neither a 32-row strip of x nor a
// 32-column panel of W fits L1 at K = 1024), and at rows 2 or 8 KiB apart
// the strip's lines fall into a few L1 sets. It reached about half of what
// the tiles deliver fed from L1 (amx_peak.cpp), as oneDNN does.
//
// The blocked variants here:
//   - pack x once into 1 KiB tiles ([strip][k block][half], 16 rows of 64
//     contiguous bytes), so a strip's tiles occupy consecutive lines;
//   - cut K into chunks so that a strip's chunk of x (32 rows x chunk) stays
//     in L1 while it meets every 32-column block of the item's range of W,
//     which streams from L2 (half the L2 traffic of the twin); y's float32
//     block is stored and loaded again between chunks, which keeps the sums
//     in the same order, so every variant must give the twin's bits;
//   - optionally prefetch the next k block's W tiles into L1.
// An item is a range of strips x a range of columns, handed out dynamically.
//
//   g++ -O2 -std=c++20 -mamx-tile -mamx-bf16 -mavx512f -fopenmp dev/cpu/amx_matmul_blocked.cpp -ldnnl -o /tmp/amx_blocked
//   OMP_NUM_THREADS=16 /tmp/amx_blocked
// Without AMX (a check of the indexing only, small shapes, emulated tiles):
//   g++ -O2 -std=c++20 -mamx-tile -mamx-bf16 -mavx512f -mavx512bw -fopenmp -DEMULATED
//     -include tests/backend/cpu/amx_emulated/amx_emulation.h dev/cpu/amx_matmul_blocked.cpp -ldnnl -o /tmp/amx_emu
#include "amx_linear_plain.h"
#include "amx_tiles.h"
#include "median_time.h"
#include "onednn_bf16_linear.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using amx_plain::from_bf16;
using amx_plain::pack_weights;
using amx_plain::to_bf16;

// The twin: amx_linear_plain.h's kernel (x read in place, y's block in the
// accumulators over all of K), 128 x 128 items.
void plain(const uint16_t* x, const uint16_t* wp, float* y, int mp, int n, int k) {
  amx_plain::amx_linear(x, wp, y, mp, n, k);
}

struct Variant {
  const char* name;
  bool pack_x;          // x packed into tiles first (else read in place)
  int block_n;          // columns per item
  int chunk_k;          // K per chunk (0: all of K)
  int strips_per_item;  // 32-row strips per item
  bool prefetch;        // prefetch the next k block's W tiles into L1
};

// x [mp, K] (rows past m are zero) -> packed [strip][kb][half] tiles.
void pack_x(const uint16_t* x, uint16_t* xp, int mp, int k) {
  const int kbs = k / 32, strips = mp / 32;
#pragma omp for schedule(static)
  for (int s = 0; s < strips; ++s)
    for (int r = 0; r < 32; ++r) {
      const uint16_t* row = x + static_cast<size_t>(s * 32 + r) * k;
      uint16_t* dst = xp + static_cast<size_t>(s) * kbs * 1024 + (r / 16) * 512 + (r % 16) * 32;
      for (int kb = 0; kb < kbs; ++kb)
        _mm512_store_si512(dst + static_cast<size_t>(kb) * 1024, _mm512_loadu_si512(row + kb * 32));
    }
}

inline void prefetch_tile(const uint16_t* t) {
  for (int line = 0; line < 16; ++line) _mm_prefetch(reinterpret_cast<const char*>(t) + line * 64, _MM_HINT_T0);
}

void blocked(const uint16_t* x, uint16_t* xp, const uint16_t* wp, float* y, int mp, int n, int k, const Variant& v) {
  const int kbs = k / 32, strips = mp / 32;
  const int chunk = v.chunk_k > 0 ? std::min(v.chunk_k, k) / 32 : kbs;
  const int nranges = (n + v.block_n - 1) / v.block_n;
  const int mranges = (strips + v.strips_per_item - 1) / v.strips_per_item;
#pragma omp parallel
  {
    if (v.pack_x) pack_x(x, xp, mp, k);  // ends in the omp for's barrier
    configure_tiles();
#pragma omp for schedule(dynamic) collapse(2)
    for (int nr = 0; nr < nranges; ++nr)
      for (int mr = 0; mr < mranges; ++mr) {
        const int s_end = std::min(strips, (mr + 1) * v.strips_per_item);
        const int j_end = std::min(n, (nr + 1) * v.block_n);
        for (int s = mr * v.strips_per_item; s < s_end; ++s)
          for (int k0 = 0; k0 < kbs; k0 += chunk) {
            const int k1 = std::min(kbs, k0 + chunk);
            for (int j = nr * v.block_n; j < j_end; j += 32) {
              float* c = y + static_cast<size_t>(s) * 32 * n + j;
              if (k0 == 0) {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
              } else {
                _tile_loadd(0, c, n * 4);
                _tile_loadd(1, c + 16, n * 4);
                _tile_loadd(2, c + static_cast<size_t>(16) * n, n * 4);
                _tile_loadd(3, c + static_cast<size_t>(16) * n + 16, n * 4);
              }
              const uint16_t* b0 = wp + static_cast<size_t>(j / 16) * kbs * 512;
              const uint16_t* b1 = b0 + static_cast<size_t>(kbs) * 512;
              for (int kb = k0; kb < k1; ++kb) {
                if (v.pack_x) {
                  const uint16_t* a = xp + (static_cast<size_t>(s) * kbs + kb) * 1024;
                  _tile_loadd(4, a, 64);
                  _tile_loadd(5, a + 512, 64);
                } else {
                  const uint16_t* a = x + static_cast<size_t>(s) * 32 * k + kb * 32;
                  _tile_loadd(4, a, k * 2);
                  _tile_loadd(5, a + static_cast<size_t>(16) * k, k * 2);
                }
                _tile_loadd(6, b0 + static_cast<size_t>(kb) * 512, 64);
                _tile_loadd(7, b1 + static_cast<size_t>(kb) * 512, 64);
                if (v.prefetch && kb + 1 < k1) {
                  prefetch_tile(b0 + static_cast<size_t>(kb + 1) * 512);
                  prefetch_tile(b1 + static_cast<size_t>(kb + 1) * 512);
                }
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
              }
              _tile_stored(0, c, n * 4);
              _tile_stored(1, c + 16, n * 4);
              _tile_stored(2, c + static_cast<size_t>(16) * n, n * 4);
              _tile_stored(3, c + static_cast<size_t>(16) * n + 16, n * 4);
            }
          }
      }
    _tile_release();
  }
}

const Variant kVariants[] = {
    {"packed, K whole, 256 cols x 4 strips", true, 256, 0, 4, false},
    {"packed, K 256, 256 cols x 4 strips", true, 256, 256, 4, false},
    {"packed, K 512, 256 cols x 4 strips", true, 256, 512, 4, false},
    {"packed, K 256, 512 cols x 2 strips", true, 512, 256, 2, false},
    {"packed, K 256, 128 cols x 8 strips", true, 128, 256, 8, false},
    {"packed, K 256, 256 cols x 4 strips, prefetch", true, 256, 256, 4, true},
    {"in place, K 256, 256 cols x 4 strips", false, 256, 256, 4, false},
};

}  // namespace

int main(int argc, char** argv) {
#ifndef EMULATED
  if (!request_amx()) return 1;
  const int shapes[][3] = {{978, 1024, 3072},  {978, 1024, 1024},  {978, 1024, 4096},  {978, 4096, 1024},
                           {7824, 1024, 3072}, {7824, 1024, 1024}, {7824, 1024, 4096}, {7824, 4096, 1024}};
#else
  const int shapes[][3] = {{70, 128, 96}, {33, 256, 160}, {100, 64, 300 / 32 * 32}};
#endif
  const bool small_only = argc > 1 && std::strcmp(argv[1], "small") == 0;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::printf("%d threads\n", omp_get_max_threads());
  for (const auto& s : shapes) {
    const int m = s[0], k = s[1], n = s[2];
    if (small_only && m > 1000) continue;
    const int mp = (m + 31) / 32 * 32;
    const double flop = 2.0 * m * n * k;
    std::vector<uint16_t> x(static_cast<size_t>(mp) * k, 0), w(static_cast<size_t>(n) * k);
    for (size_t i = 0; i < static_cast<size_t>(m) * k; ++i) x[i] = to_bf16(normal(rng));
    for (auto& v : w) v = to_bf16(normal(rng) * 0.03f);
    const std::vector<uint16_t> wp = pack_weights(w, n, k);
    std::vector<uint16_t, std::allocator<uint16_t>> xp_storage(static_cast<size_t>(mp) * k + 32);
    uint16_t* xp = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(xp_storage.data()) + 63) & ~uintptr_t{63});
    std::vector<float> y_ref(static_cast<size_t>(mp) * n), y(static_cast<size_t>(mp) * n);

    std::printf("%5d x %4d -> %4d\n", m, k, n);
    const double t_plain = median_ms([&] { plain(x.data(), wp.data(), y_ref.data(), mp, n, k); });
    std::printf("  %-48s %8.3f ms %6.2f TFLOP/s\n", "twin (amx_matmul.cpp)", t_plain, flop / t_plain * 1e-9);

    // The twin against float64 on every 13th row.
    const double worst = amx_plain::max_error_vs_float64(x, w, y_ref.data(), m, n, k, 13);
    std::printf("  twin: max error / sum|products| %.1e%s\n", worst, worst < 1e-6 ? "" : "  <-- WRONG");

    for (const Variant& v : kVariants) {
      std::fill(y.begin(), y.end(), NAN);
      const double t = median_ms([&] { blocked(x.data(), xp, wp.data(), y.data(), mp, n, k, v); });
      const bool same = std::memcmp(y.data(), y_ref.data(), static_cast<size_t>(m) * n * 4) == 0;
      std::printf("  %-48s %8.3f ms %6.2f TFLOP/s%s\n", v.name, t, flop / t * 1e-9,
                  same ? "" : "  <-- NOT THE TWIN'S BITS");
    }
    {
      // The packing of x alone, as the packed variants do it.
      const double t = median_ms([&] {
#pragma omp parallel
        pack_x(x.data(), xp, mp, k);
      });
      std::printf("  %-48s %8.3f ms\n", "(packing x alone)", t);
    }

    // oneDNN: float32 out, and the model's bf16 out with a bias.
    std::vector<float> y_dnnl(static_cast<size_t>(m) * n);
    const OnednnLinearTimes t_dnnl = time_onednn_bf16_linear(x.data(), w.data(), m, k, n, y_dnnl.data());
    std::printf("  %-48s %8.3f ms %6.2f TFLOP/s (%s)\n", "oneDNN, float32 out", t_dnnl.f32_out_ms,
                flop / t_dnnl.f32_out_ms * 1e-9, t_dnnl.impl.c_str());
    std::printf("  %-48s %8.3f ms %6.2f TFLOP/s\n", "oneDNN, bf16 out + bias", t_dnnl.bf16_out_bias_ms,
                flop / t_dnnl.bf16_out_bias_ms * 1e-9);
    std::fflush(stdout);
  }
}
