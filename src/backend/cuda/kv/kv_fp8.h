// The fp8 KV cache's two kernels (--kv-dtype fp8; the format is
// kv/fp8_e4m3.h, shared with the CPU stores):
//
//   append:      the step's row moves (kv_table.h) for one block. A move
//                from the step's k/v rows (bf16 or f32) quantises each head's
//                slice: scale = max|x| / 448, codes = e4m3(x / scale), round
//                to nearest even and saturate, exactly the CPU quantiser's
//                arithmetic, so both backends store the same codes for the
//                same input. A move from another slot copies codes and scale.
//   dequantise:  the visible pages of one block, read back to bfloat16
//                (code value * scale, rounded to nearest even) into a staging
//                page set that the bf16 attention kernels (mma.sync, wgmma-ws)
//                read unchanged through a second device table.
//
// An fp8 page is [K codes][V codes][K scales][V scales]: page_size slots of
// num_heads * head_dim one-byte codes each, then page_size * num_heads
// float32 scales for K and as many for V. Both kernels take the number of
// moves and of visible pages from the device table, and their grids are
// fixed: they can be captured in a CUDA graph and replayed.
#pragma once

#include "backend/cuda/kv/kv_table.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lingbot::cuda {

struct Fp8PageShape {
  int32_t page_size = 0;
  int32_t num_heads = 0;
  int32_t head_dim = 0;
  LB_HOST_DEVICE int64_t code_row_bytes() const { return int64_t{num_heads} * head_dim; }        // one token's K (or V)
  LB_HOST_DEVICE int64_t codes_bytes() const { return 2 * int64_t{page_size} * code_row_bytes(); }  // K and V codes
  LB_HOST_DEVICE int64_t scales_v_offset() const { return int64_t{page_size} * num_heads * 4; }    // K scales -> V scales
  LB_HOST_DEVICE int64_t page_bytes() const { return codes_bytes() + 2 * scales_v_offset(); }
};

// k, v: the step's rows, bf16 (input_is_bf16) or f32, [rows][num_heads * head_dim].
void launch_kv_append_fp8(const KvTableHeader* table, int block, const void* k, const void* v, bool input_is_bf16,
                          const Fp8PageShape& shape, cudaStream_t stream);

// Block `block`'s visible pages (table) -> the bf16 pages of `staging`, a
// table with the same visible page count whose page i (block 0, layout
// [kv][slot][head][dim]) receives visible page i. Both tables are read on
// the device, so a recorded launch stays right when either is re-uploaded
// or the staging pages move.
void launch_kv_dequantise(const KvTableHeader* table, int block, const KvTableHeader* staging,
                          const Fp8PageShape& shape, cudaStream_t stream);

}  // namespace lingbot::cuda
