// The CUDA backend as a separately loaded module, liblingbot_cuda.so (the
// habit of ggml's backend registry): lingbot-map and the library link no
// CUDA library, so the CPU path runs on a machine without them, and asking
// for CUDA there says why it is unavailable, in the dynamic loader's words
// ("libcudart.so.13: cannot open shared object file: ...").
//
// The module (src/backend/cuda/module/) holds its own copy of the layers
// below the backend, with their symbols kept local, and exports one C
// function, kEntryPoint, that returns its Table. The two sides share state
// only through the table: the backend object and the device allocator that
// Tensors on Device::CUDA need on the host's side (tensor.h's registry is
// one per copy of core).
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_backend_options.h"
#include "backend/device_memory_account.h"

#include <memory>
#include <string>

namespace lingbot::cuda_module {

// Made from the same build as the program that loads it; the version and
// the sizes below refuse a stale module found beside a newer program.
inline constexpr int kAbiVersion = 2;
inline constexpr char kEntryPoint[] = "lingbot_cuda_module_table";
inline constexpr char kFileName[] = "liblingbot_cuda.so";

struct Table {
  int abi_version = kAbiVersion;
  size_t table_size = sizeof(Table);
  size_t options_size = sizeof(cuda::CudaBackendOptions);
  std::string (*device_unavailable_reason)() = nullptr;  // "" when a device can be used
  std::unique_ptr<Backend> (*make_backend)(const cuda::CudaBackendOptions& options) = nullptr;
  DeviceAllocator (*tensor_allocator)(int device) = nullptr;
  DeviceMemoryAccount (*memory_account)() = nullptr;  // the module's allocations (backend/cuda/device_memory.h)
};

// Why the CUDA backend cannot be used here ("" when it can): the module
// could not be loaded (not found, or a CUDA library it needs is missing),
// or it loaded and finds no usable device. Loads the module once per
// process. Never throws.
std::string unavailable_reason();

// The CUDA backend, from the module; throws Error "device cuda: CUDA is
// unavailable: <why>" when the module cannot be loaded.
std::unique_ptr<Backend> make_backend(const cuda::CudaBackendOptions& options);

// The CUDA backend's account of device memory (what it allocated, by
// purpose, and the driver's figures); empty when the module is not loaded.
DeviceMemoryAccount memory_account();

}  // namespace lingbot::cuda_module
