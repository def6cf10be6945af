// The per-step table the GPU KV cache hands to its kernels, in device memory.
//
// Why a table in device memory: the visible page list and the rows a step
// writes change every frame, but a captured CUDA graph replays kernels with
// the arguments they were captured with. So the kernels take one pointer,
// to a KvTableHeader whose address never changes for the life of the cache;
// begin_step() rewrites its contents with asynchronous copies from pinned
// host memory, ordered on the cache's stream before the step's kernels.
//
// Memory the table points into (the cache's page pool):
//   the pool grows in chunks of pages that never move; chunk c holds the
//   pages [c*ppc, (c+1)*ppc) of EVERY block:  chunk[block][page % ppc][page]
//   with one page = [kv][slot][head][dim] (kv/page_table.h PageGeometry).
//   Every chunk has the same size, so block b's copy of any page lies
//   b * block_stride bytes after block 0's. The table lists block 0's
//   addresses; a kernel for block b adds b * block_stride.
#pragma once

#include "backend/cuda/fast_div.h"
#include "backend/cuda/kv/tensor_map.h"
#include "kv/page_table.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lingbot::cuda {

// One token row append() moves: K and V, all blocks.
struct DeviceRowMove {
  char* dst;        // block 0's destination K row; its V row is dst + v_offset
  const char* src;  // block 0's source K row in the pool, or null: row src_row of the step's k/v tensors
  int64_t src_row;
  // fp8 pages only (kv_fp8.h), else null: the K scales of the destination
  // and source slots (V scales at + scale_v_offset).
  char* dst_scales;
  const char* src_scales;
};

struct KvTableHeader {
  int32_t num_keys = 0;    // visible keys: (num_pages - 1) * page_size + last_page_len
  int32_t num_pages = 0;
  int32_t page_size = 1;   // tokens per page
  int32_t num_moves = 0;   // rows append() moves this step
  FastDiv page_div;        // division by page_size
  int64_t row_bytes = 0;   // one token's K (or V): num_heads * head_dim * element size
  int64_t v_offset = 0;    // bytes from a page's K block to its V block (= page_size * row_bytes)
  int64_t block_stride = 0;  // bytes from block b's copy of a page to block b + 1's
  int64_t scale_v_offset = 0;  // fp8 pages: bytes from a slot's K scales to its V scales
  char* const* page_ptrs = nullptr;       // [num_pages] block 0's page base (K of slot 0), attention order
  const DeviceRowMove* moves = nullptr;   // [num_moves]
  // TMA (tensor_map.h), or null: one map per pool chunk, and each visible
  // page's pool page id (chunk id / pages_per_chunk, the rest its place).
  const TensorMap* tensor_maps = nullptr;  // [chunks]
  const int32_t* page_ids = nullptr;       // [num_pages], attention order
  int32_t pages_per_chunk = 1;
  int32_t tma_box_rows = 0;                // the maps' box: slots per copy
  int32_t num_tensor_maps = 0;
};

// A step's row moves in page terms (host side): every RowWrite row, then
// every SlotCopy slot. A copy whose source slot was written in the same
// step (a frame stored and evicted in one step) reads the step's input row
// instead, so no move depends on another and one kernel runs them all.
struct RowMove {
  int32_t dst_page;
  int32_t dst_slot;
  int32_t src_page;  // -1: the source is row `src` of the step's k/v tensors
  int64_t src;       // input row, or slot of src_page
  bool operator==(const RowMove&) const = default;
};
std::vector<RowMove> row_moves(const kv::StepPlan& plan);

// Owns the device header (fixed address), the device arrays it points to
// (regrown when a step needs more room) and two pinned staging buffers used
// in turn. All copies go on `stream`.
class KvTable {
 public:
  explicit KvTable(cudaStream_t stream);
  ~KvTable();
  KvTable(const KvTable&) = delete;
  KvTable& operator=(const KvTable&) = delete;

  // Fills the next staging buffer and enqueues its copy to the device. The
  // header's pointers are filled in here; `header` gives the scalars.
  // Waits (host) only for the copy made from the same staging buffer two
  // uploads ago. Must not be called during stream capture.
  // With tensor maps (one per chunk), page_ids lists each visible page's
  // pool id; without, both are empty and the kernels copy with cp.async.
  void upload(const KvTableHeader& header, const std::vector<char*>& page_ptrs,
              const std::vector<DeviceRowMove>& moves, const std::vector<int32_t>& page_ids = {},
              const std::vector<TensorMap>& tensor_maps = {});

  const KvTableHeader* device() const { return header_dev_; }  // stable for the table's life

 private:
  struct Staging {
    void* host = nullptr;  // pinned
    size_t capacity = 0;
    cudaEvent_t copied = nullptr;
    bool pending = false;
  };

  cudaStream_t stream_;
  KvTableHeader* header_dev_ = nullptr;
  char* arrays_dev_ = nullptr;
  size_t arrays_capacity_ = 0;
  std::array<Staging, 2> staging_{};
  int next_staging_ = 0;
};

}  // namespace lingbot::cuda
