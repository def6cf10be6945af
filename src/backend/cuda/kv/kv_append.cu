#include "backend/cuda/kv/kv_append.h"

#include "backend/cuda/cuda_check.h"

#include <cuda_runtime.h>

namespace lingbot::cuda {

namespace {

constexpr int kAppendThreads = 256;
constexpr int kAppendBlocksPerSm = 2;

// Work item u = (move, kv, unit) with the unit fastest, so that a warp copies
// consecutive bytes of one row.
template <typename Unit>
__global__ void __launch_bounds__(kAppendThreads)
    kv_append_kernel(const KvTableHeader* table, int block, const char* k, const char* v) {
  const KvTableHeader& t = *table;
  const int64_t units_per_row = t.row_bytes / static_cast<int64_t>(sizeof(Unit));
  const int64_t total = int64_t{t.num_moves} * 2 * units_per_row;
  const int64_t block_offset = int64_t{block} * t.block_stride;
  for (int64_t u = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; u < total;
       u += int64_t{gridDim.x} * blockDim.x) {
    const int64_t move = u / (2 * units_per_row);
    const int64_t rest = u - move * 2 * units_per_row;
    const bool is_v = rest >= units_per_row;
    const int64_t byte = (is_v ? rest - units_per_row : rest) * static_cast<int64_t>(sizeof(Unit));
    const DeviceRowMove m = t.moves[move];
    const int64_t kv_offset = is_v ? t.v_offset : 0;
    char* dst = m.dst + block_offset + kv_offset + byte;
    const char* src = m.src != nullptr ? m.src + block_offset + kv_offset + byte
                                       : (is_v ? v : k) + m.src_row * t.row_bytes + byte;
    *reinterpret_cast<Unit*>(dst) = *reinterpret_cast<const Unit*>(src);
  }
}


template <typename Unit>
void launch(const KvTableHeader* table, int block, const void* k, const void* v, cudaStream_t stream) {
  kv_append_kernel<Unit><<<current_device_sm_count() * kAppendBlocksPerSm, kAppendThreads, 0, stream>>>(
      table, block, static_cast<const char*>(k), static_cast<const char*>(v));
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace

int current_device_sm_count() {
  static thread_local int cached_device = -1;
  static thread_local int cached = 0;
  int device = 0;
  LB_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    LB_CUDA_CHECK(cudaDeviceGetAttribute(&cached, cudaDevAttrMultiProcessorCount, device));
    cached_device = device;
  }
  return cached;
}

void launch_kv_append(const KvTableHeader* table, int block, const void* k, const void* v, int unit_bytes,
                      cudaStream_t stream) {
  switch (unit_bytes) {
    case 16: launch<uint4>(table, block, k, v, stream); break;
    case 8: launch<uint2>(table, block, k, v, stream); break;
    case 4: launch<uint32_t>(table, block, k, v, stream); break;
    default: launch<uint16_t>(table, block, k, v, stream); break;
  }
}

int kv_append_unit_bytes(int64_t row_bytes, uintptr_t k, uintptr_t v) {
  // The lowest set bit of the three, capped at 16. (Computed in 64 bits: an
  // address aligned to 2 GiB or more has its lowest set bit beyond int.)
  const uint64_t bits = static_cast<uint64_t>(row_bytes) | k | v | 16u;
  return static_cast<int>(bits & (~bits + 1));
}

}  // namespace lingbot::cuda
