// Driver for the retired wgmma v1 kernel (attention_wgmma.cu): checks it
// against the naive kernel (fp64 accumulation, the obviously-right twin) and
// times it beside the kernels that ship (mma.sync, wgmma-ws), on dense
// groups of the aggregator's shapes (16 heads of 64, bf16).
//
//   cmake -B build -DLINGBOT_DEV=ON && cmake --build build --target attention_wgmma_dev
//   build/bin/attention_wgmma_dev            (an sm_90 GPU; times are medians of 20 runs)
#include "backend/cuda/attention/attention_launch.h"
#include "backend/cuda/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace lingbot::cuda::attn {
// Defined in attention_wgmma.cu.
template <typename Keys>
void launch_attention_wgmma(const AttentionArgs<__nv_bfloat16>& args, const Keys& keys, cudaStream_t stream);
}  // namespace lingbot::cuda::attn

namespace {

using namespace lingbot::cuda;
using bf16 = __nv_bfloat16;

struct Shape {
  int groups, rows, heads;
};

template <typename Launch>
float median_ms(Launch launch) {
  cudaEvent_t start, stop;
  LB_CUDA_CHECK(cudaEventCreate(&start));
  LB_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) launch();  // warm-up
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    LB_CUDA_CHECK(cudaEventRecord(start));
    launch();
    LB_CUDA_CHECK(cudaEventRecord(stop));
    LB_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    LB_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  LB_CUDA_CHECK(cudaEventDestroy(start));
  LB_CUDA_CHECK(cudaEventDestroy(stop));
  return ms[ms.size() / 2];
}

std::vector<float> download(const bf16* p, size_t n) {
  std::vector<bf16> bits(n);
  LB_CUDA_CHECK(cudaMemcpy(bits.data(), p, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(bits[i]);
  return out;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

bool run(const Shape& s, std::mt19937& rng) {
  constexpr int kHeadDim = 64;
  const size_t n = size_t(s.groups) * s.rows * s.heads * kHeadDim;
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<bf16> host(n);
  bf16 *q, *k, *v, *out;
  for (bf16** p : {&q, &k, &v, &out}) {
    LB_CUDA_CHECK(cudaMalloc(p, n * sizeof(bf16)));
    if (*p == out) break;
    for (bf16& x : host) x = __float2bfloat16(dist(rng));
    LB_CUDA_CHECK(cudaMemcpy(*p, host.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
  }
  attn::AttentionArgs<bf16> a;
  a.q = q;
  a.out = out;
  a.groups = s.groups;
  a.rows = s.rows;
  a.num_heads = s.heads;
  a.head_dim = kHeadDim;
  a.scale_log2 = attn::kLog2e / std::sqrt(float(kHeadDim));
  a.zero_fill_src = k;
  const attn::DenseKeys<bf16> keys{k, v, int64_t{s.heads} * kHeadDim, s.rows, kHeadDim};

  attn::launch_attention(AttentionKernel::Naive, a, keys, nullptr);
  LB_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> ref = download(out, n);

  struct Version {
    const char* name;
    void (*launch)(const attn::AttentionArgs<bf16>&, const attn::DenseKeys<bf16>&);
  };
  const Version versions[] = {
      {"naive", [](const auto& a, const auto& k) { attn::launch_attention(AttentionKernel::Naive, a, k, nullptr); }},
      {"mma", [](const auto& a, const auto& k) { attn::launch_attention(AttentionKernel::Mma, a, k, nullptr); }},
      {"wgmma v1", [](const auto& a, const auto& k) { attn::launch_attention_wgmma(a, k, nullptr); }},
      {"wgmma-ws", [](const auto& a, const auto& k) { attn::launch_attention(AttentionKernel::WgmmaWs, a, k, nullptr); }},
  };
  // 4 * rows^2 * head_dim flops per (group, head): QK^T and PV.
  const double flops = 4.0 * s.groups * s.heads * double(s.rows) * s.rows * kHeadDim;
  bool ok = true;
  for (const Version& ver : versions) {
    LB_CUDA_CHECK(cudaMemset(out, 0, n * sizeof(bf16)));
    ver.launch(a, keys);
    LB_CUDA_CHECK(cudaDeviceSynchronize());
    const double err = relative_error(download(out, n), ref);
    const float ms = median_ms([&] { ver.launch(a, keys); });
    const bool pass = err < 1e-2;  // bf16 output rounding
    ok = ok && pass;
    std::printf("%d x %4d x %2d  %-9s rel err %.2e %s  %8.1f us  %6.1f TFLOP/s\n", s.groups, s.rows, s.heads,
                ver.name, err, pass ? "ok  " : "FAIL", ms * 1e3, flops / (ms * 1e-3) / 1e12);
  }
  for (bf16* p : {q, k, v, out}) LB_CUDA_CHECK(cudaFree(p));
  return ok;
}

}  // namespace

int main() {
  int device = 0, major = 0;
  LB_CUDA_CHECK(cudaGetDevice(&device));
  LB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major != 9) {
    std::printf("attention_wgmma_dev needs a Hopper GPU (sm_90), found sm_%d0\n", major);
    return 1;
  }
  std::mt19937 rng(404);
  bool ok = true;
  for (const Shape& s : {Shape{1, 978, 16}, Shape{8, 978, 16}, Shape{1, 7824, 16}}) ok = run(s, rng) && ok;
  return ok ? 0 : 1;
}
