// Whether kernels launched by launch_kernel (kernel_launch.cuh) may start
// while the kernel before them finishes: the host side, in a header free of
// device code, for the backend that sets it.
#pragma once

namespace lingbot::cuda {

// Whether launch_kernel lets kernels start early on the current device:
// allowed (CudaBackendOptions::programmatic_launch) and compute capability
// 9.x, whose code here is the sm_90a build that holds the wait. Ampere has no
// such launches, and GPUs newer than Hopper run code compiled from the
// compute_80 PTX, which has no wait.
bool programmatic_launch_enabled();

// Process-wide; every CUDA backend sets it from its options when it is made.
void allow_programmatic_launch(bool allowed);

}  // namespace lingbot::cuda
