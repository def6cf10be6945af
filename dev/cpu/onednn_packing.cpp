// Experiment: do oneDNN's matmul primitives gain from weights packed once in
// the layout the implementation wants (format_tag::any, reordered at load)
// over weights in the model's plain [out, in] layout, which the primitive
// packs again on every call? bf16 (AMX where present) and float32, on the
// model's Linear shapes; dnnl_sgemm (the fp32 mode's kernel) beside them.
//
//   g++ -O2 -std=c++20 dev/cpu/onednn_packing.cpp -ldnnl -fopenmp -o /tmp/packing
//   OMP_NUM_THREADS=16 /tmp/packing
#include "median_time.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>

using dnnl::memory;
using Dt = memory::data_type;

namespace {

std::string describe(const memory::desc& d) {
  // The blocking of a desc: inner blocks and their indices.
  const auto& b = d.data.format_desc.blocking;
  std::string s = "strides";
  for (int i = 0; i < d.data.ndims; ++i) s += " " + std::to_string(b.strides[i]);
  s += " inner";
  for (int i = 0; i < b.inner_nblks; ++i) s += " " + std::to_string(b.inner_idxs[i]) + ":" + std::to_string(b.inner_blks[i]);
  return s;
}

void run(Dt dt, int64_t M, int64_t K, int64_t N, dnnl::engine& eng, dnnl::stream& st) {
  const size_t esz = dt == Dt::bf16 ? 2 : 4;
  std::vector<char> x(M * K * esz), w(N * K * esz), y(M * N * esz);
  std::mt19937 rng(1);
  for (auto& c : x) c = static_cast<char>(rng() & 0x3f);
  for (auto& c : w) c = static_cast<char>(rng() & 0x3f);
  const memory::desc src({M, K}, dt, {K, 1}), dst({M, N}, dt, {N, 1});
  const memory::desc plain({K, N}, dt, {1, K});  // w[out, in] read as [in, out]
  const memory::desc any({K, N}, dt, memory::format_tag::any);

  dnnl::matmul::primitive_desc pd_plain(dnnl::matmul::desc(src, plain, dst), eng);
  dnnl::matmul p_plain(pd_plain);
  memory mx(src, eng, x.data()), mw(plain, eng, w.data()), my(dst, eng, y.data());
  const double t_plain = median_ms([&] {
    p_plain.execute(st, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, my}});
    st.wait();
  });

  dnnl::matmul::primitive_desc pd_any(dnnl::matmul::desc(src, any, dst), eng);
  dnnl::matmul p_any(pd_any);
  memory packed(pd_any.weights_desc(), eng);
  dnnl::reorder(mw, packed).execute(st, mw, packed);
  st.wait();
  const double t_packed = median_ms([&] {
    p_any.execute(st, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, packed}, {DNNL_ARG_DST, my}});
    st.wait();
  });
  const double gf = 2.0 * M * N * K / 1e9;
  std::printf("%s M=%5ld K=%4ld N=%4ld  plain %8.3f ms (%6.0f GF/s) [%s]  packed %8.3f ms (%6.0f GF/s) [%s] %s, bytes %zu vs %zu\n",
              dt == Dt::bf16 ? "bf16" : "f32 ", (long)M, (long)K, (long)N, t_plain, gf / t_plain * 1e3,
              pd_plain.impl_info_str(), t_packed, gf / t_packed * 1e3, pd_any.impl_info_str(),
              describe(pd_any.weights_desc()).c_str(), pd_any.weights_desc().get_size(), N * K * esz);
  if (dt == Dt::f32) {
    std::vector<float> xf(M * K, 0.5f), wf(N * K, 0.25f), yf(M * N);
    const double t_sgemm = median_ms([&] {
      dnnl_sgemm('N', 'T', M, N, K, 1.f, xf.data(), K, wf.data(), K, 0.f, yf.data(), N);
    });
    std::printf("     dnnl_sgemm %8.3f ms (%6.0f GF/s)\n", t_sgemm, gf / t_sgemm * 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  if (argc > 1 && std::strcmp(argv[1], "tiles") == 0) {
    // The bf16 attention's per-tile products (run with OMP_NUM_THREADS=1):
    // S = Q K^T (256 x 64 . 64 x 512) and O += P V (256 x 512 . 512 x 64).
    for (int64_t rows : {256, 512}) {
      run(Dt::bf16, rows, 64, 512, eng, st);
      run(Dt::bf16, rows, 512, 64, eng, st);
      run(Dt::bf16, rows, 64, 2048, eng, st);
      run(Dt::bf16, rows, 2048, 64, eng, st);
    }
    return 0;
  }
  const int64_t shapes[][2] = {{1024, 3072}, {1024, 1024}, {1024, 4096}, {4096, 1024}};
  for (Dt dt : {Dt::bf16, Dt::f32})
    for (int64_t M : {978, 7824})
      for (const auto& s : shapes) run(dt, M, s[0], s[1], eng, st);
  // Does the packed layout depend on M? One-token rows (the camera head's).
  for (Dt dt : {Dt::bf16, Dt::f32}) run(dt, 1, 2048, 6144, eng, st);
  return 0;
}
