// Kernel launches that let the next kernel of the stream start early
// (programmatic dependent launch, Hopper).
//
// Between two dependent kernels of a stream the GPU normally waits for the
// first to finish entirely, flush its writes and retire, and only then
// starts launching the second: a few microseconds a boundary, in a frame of
// ~1,000 kernels most of which run for 5-20 us. Launched by launch_kernel,
// a kernel may instead be launched while the one before it is still
// running its last CTAs: its CTAs take the SMs that the tail leaves free
// and wait there, at their first statement, await_previous_kernels(), until
// the kernel before has finished and its writes are visible. Nothing the
// kernel reads or writes is touched before that wait, so the order of
// every memory access is the stream's order, as without it.
//
// Every kernel launched through launch_kernel must begin with
// await_previous_kernels() (ProgrammaticLaunch.EveryKernelAwaitsThePreviousOnes
// checks the sources). Kernels launched otherwise (cuBLASLt's, cuDNN's) are
// ordered as usual: only a launch_kernel launch after a kernel may start
// early, and only where this process runs the sm_90a code, the one that
// holds the wait (programmatic_launch_enabled, kernel_launch.h).
#pragma once

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_launch.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace lingbot::cuda {

// The first statement of every kernel launched by launch_kernel: waits for
// the kernels before it in the stream (their completion and the visibility
// of their writes), then allows the next kernel to launch, which waits in
// the same way. A no-op where the kernel was launched without the option.
__device__ __forceinline__ void await_previous_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem_bytes, stream>>>(args...), checked, with the
// early start above where it is enabled.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchAttribute early_start{};
  early_start.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early_start.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &early_start;
  config.numAttrs = programmatic_launch_enabled() ? 1 : 0;
  LB_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace lingbot::cuda
