// Throughput of the exponential unit on the GPU machine: ex2.approx.f32
// against the packed ex2.approx.f16x2 and ex2.approx.ftz.bf16x2 (two
// results per instruction). Decides whether the attention kernel's softmax
// can take its exponentials two at a time (attention_versions.md, round 16).
//
//   nvcc -O3 -arch=sm_90a -o mufu_probe tools/device/mufu_probe.cu && ./mufu_probe
//   cuobjdump --dump-sass mufu_probe | grep MUFU | sort | uniq -c
//
// Each thread runs 8 independent chains (enough to hide the unit's latency)
// of x <- 2^x * c; a result per element is stored so nothing is removed.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

constexpr int kChains = 8;
constexpr int kIters = 4096;

__global__ void ex2_f32(float* out, float seed) {
  float x[kChains];
  for (int c = 0; c < kChains; ++c) x[c] = seed * (threadIdx.x + c) * -1e-3f;
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[c]));
  }
  float s = 0;
  for (int c = 0; c < kChains; ++c) s += x[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <bool kBf16>
__global__ void ex2_x2(float* out, float seed) {
  uint32_t x[kChains];
  for (int c = 0; c < kChains; ++c) {
    const float a = seed * (threadIdx.x + c) * -1e-3f;
    if (kBf16) {
      asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(x[c]) : "f"(a));
    } else {
      asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(x[c]) : "f"(a));
    }
  }
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if (kBf16) {
        asm volatile("ex2.approx.ftz.bf16x2 %0, %0;" : "+r"(x[c]));
      } else {
        asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(x[c]));
      }
    }
  }
  uint32_t s = 0;
  for (int c = 0; c < kChains; ++c) s ^= x[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(s);
}

template <typename Kernel>
void time_it(const char* name, Kernel kernel, int results_per_instruction, int sms, int clock_khz) {
  float* out;
  cudaMalloc(&out, sizeof(float) * sms * 8 * 1024);
  const dim3 grid(sms * 8), block(1024 / 4);
  kernel<<<grid, block>>>(out, 1.f);  // warm-up
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(a);
    kernel<<<grid, block>>>(out, 1.f);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (ms < best) best = ms;
  }
  const double instructions = double(grid.x) * block.x * kIters * kChains;
  const double per_clk_sm = instructions / (best * 1e-3) / sms / (clock_khz * 1e3);
  std::printf("%-22s %8.3f ms  %6.2f instructions/clk/SM (max clock)  %6.2f results/clk/SM\n", name, best,
              per_clk_sm, per_clk_sm * results_per_instruction);
  cudaFree(out);
}

int main() {
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  std::printf("%s, %d SMs, max clock %d MHz\n", p.name, p.multiProcessorCount, clock_khz / 1000);
  time_it("ex2.approx.f32", ex2_f32, 1, p.multiProcessorCount, clock_khz);
  time_it("ex2.approx.f16x2", ex2_x2<false>, 2, p.multiProcessorCount, clock_khz);
  time_it("ex2.approx.ftz.bf16x2", ex2_x2<true>, 2, p.multiProcessorCount, clock_khz);
  return 0;
}
