// The GPU KV cache's scatter: the row moves of one step for one block
// (kv_table.h), one kernel launch.
#pragma once

#include "backend/cuda/kv/kv_table.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lingbot::cuda {

// For every move m of the table (count read on the device) and both K and V:
//   dst row  = m.dst + block * block_stride (+ v_offset for V)
//   src row  = m.src + block * block_stride (+ v_offset)   if m.src != null
//            = k (or v) + m.src_row * row_bytes            otherwise
// `unit_bytes` (16, 8, 4 or 2) divides row_bytes and the alignment of k, v
// and every page row. The grid is fixed (a grid-stride loop over the moves),
// so the launch is the same every step.
void launch_kv_append(const KvTableHeader* table, int block, const void* k, const void* v, int unit_bytes,
                      cudaStream_t stream);

// The largest unit (16, 8, 4, 2 or 1 bytes) that divides row_bytes and both
// addresses: what launch_kv_append may move at a time.
int kv_append_unit_bytes(int64_t row_bytes, uintptr_t k, uintptr_t v);

// Multiprocessors of the current device (cached per thread): the kv
// kernels' grids are sized by it.
int current_device_sm_count();

}  // namespace lingbot::cuda
