// The one symbol liblingbot_cuda.so exports (backend/cuda_module.h): its
// table of entry points into the CUDA backend.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda_module.h"

namespace {

using namespace lingbot;

std::unique_ptr<Backend> make_backend(const cuda::CudaBackendOptions& options) {
  return std::make_unique<cuda::CudaBackend>(options);
}

cuda_module::Table make_table() {
  cuda_module::Table table;
  table.device_unavailable_reason = &cuda::device_unavailable_reason;
  table.make_backend = &make_backend;
  table.tensor_allocator = &cuda::tensor_allocator;
  table.memory_account = &cuda::device_memory_account;
  return table;
}

const cuda_module::Table kTable = make_table();

}  // namespace

extern "C" __attribute__((visibility("default"))) const lingbot::cuda_module::Table* lingbot_cuda_module_table() {
  return &kTable;
}
