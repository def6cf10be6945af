// The paged layout as plain data: what attention reads, what a store writes.
//
// Like FlashInfer's `paged_kv_t` (include/flashinfer/page.cuh) for one
// sequence: the visible keys are the pages `page_ids` in attention order, all
// full except the last, which holds `last_page_len` valid tokens. Only flat
// int32 arrays and scalars, so a CUDA kernel can take a copy as is.
//
// Memory of one page (PageGeometry), the same on every device:
//   page[kv][slot][head][dim]   kv 0 = K, 1 = V;  slot < page_size
// i.e. K rows then V rows, each row num_heads * head_dim values. Pages are
// addressed by id in a per-block pool; how ids map to memory is the store's
// business (the CPU store keeps chunks of `pool_growth_pages` pages).
#pragma once

#include <cstdint>
#include <vector>

namespace lingbot::kv {

struct PageTable {
  int32_t page_size = 0;              // tokens per page
  std::vector<int32_t> page_ids;      // visible pages, in attention order
  int32_t last_page_len = 0;          // valid tokens of the last page, 1..page_size (0 if empty)

  int32_t num_pages() const { return static_cast<int32_t>(page_ids.size()); }
  // The length formula, stated once.
  int64_t num_tokens() const {
    return page_ids.empty() ? 0 : int64_t{num_pages() - 1} * page_size + last_page_len;
  }
  // Valid tokens of the i-th visible page.
  int32_t page_len(int32_t i) const { return i + 1 == num_pages() ? last_page_len : page_size; }

  bool operator==(const PageTable&) const = default;
};

// Offsets (in elements) inside one page, for a store and a kernel to agree on.
struct PageGeometry {
  int32_t page_size = 0;
  int32_t num_heads = 0;
  int32_t head_dim = 0;

  int64_t token_stride() const { return int64_t{num_heads} * head_dim; }   // slot -> slot + 1
  int64_t v_offset() const { return int64_t{page_size} * token_stride(); } // K block -> V block
  int64_t page_elems() const { return 2 * v_offset(); }                    // one page, K and V
};

// Step instructions, produced once per step by the PagePlanner and executed
// by every block's store in this order: all writes, then all copies.

// Rows [src_row, src_row + count) of the step's K/V (the tensors given to
// append) go to slots [slot, slot + count) of `page`.
struct RowWrite {
  int64_t src_row;
  int32_t page;
  int32_t slot;
  int32_t count;
  bool operator==(const RowWrite&) const = default;
};

// Slots [src_slot, +count) of src_page are copied to [dst_slot, +count) of
// dst_page (specials that become permanent when their frame is evicted, see
// page_planner.h). Sources are never written in the same step after the copy;
// destinations never overlap a source.
struct SlotCopy {
  int32_t src_page;
  int32_t src_slot;
  int32_t dst_page;
  int32_t dst_slot;
  int32_t count;
  bool operator==(const SlotCopy&) const = default;
};

struct StepPlan {
  int32_t num_frames = 0;
  bool store = false;
  int32_t pool_pages = 0;        // the store must have memory for page ids [0, pool_pages)
  std::vector<RowWrite> writes;  // every row of the step's K/V exactly once
  std::vector<SlotCopy> copies;  // after the writes
  PageTable visible;             // what attend() reads this step, every block
};

}  // namespace lingbot::kv
