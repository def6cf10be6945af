// Token rows of K and V as the CPU stores keep them: float32, bfloat16 or
// fp8 e4m3 with a scale per token and head (kv/fp8_e4m3.h).
//
// A KvRowBlock is one allocation holding the K and V rows of `capacity`
// token slots:
//   [K elements: capacity][V elements: capacity][K scales][V scales]
// with a token's elements [num_heads][head_dim] and its scales [num_heads]
// (fp8 only), so consecutive slots are contiguous and any run of them is one
// KvSpan for cpu::attention, which dequantises while it reads. Both stores
// are built from these blocks: the paged store's chunks of pages, the dense
// store's slabs of frame slots and chunks of retained specials. With
// `prefault`, a block's memory is first touched in parallel when it is made
// (the page faults are taken by the whole team, not by the first append's
// thread); the paged store instead faults in each page's slots when the
// page is first written (prefault(): one madvise for the range, since
// faults taken by several threads contend in the kernel), so that pages no
// frame has used take no memory. The stores keep their blocks across reset().
#pragma once

#include "backend/cpu/attention.h"
#include "core/tensor.h"
#include "kv/kv_cache.h"

#include <cstdint>
#include <string_view>

namespace lingbot::cpu {

// The element type of a CPU store: Auto is float32 on the CPU.
KvElement kv_element_for(kv::KvDtype dtype);
std::string_view kv_element_name(KvElement element);

class KvRowBlock {
 public:
  KvRowBlock(KvElement element, int num_heads, int head_dim, int64_t capacity, bool prefault);

  // Encodes rows [0, count) of k and v (float32 [count][num_heads][head_dim])
  // into slots [slot, slot + count); in parallel for large writes.
  void write(int64_t slot, const float* k, const float* v, int64_t count);
  // The same from bfloat16 rows (the bf16 mode's keys): stored as they are
  // in a bf16 block, and as their float32 values (exactly) in the others, so
  // a block holds what write() of the widened rows would give.
  void write(int64_t slot, const uint16_t* k, const uint16_t* v, int64_t count);
  // Copies slots as stored (codes and scales, no re-rounding) from another
  // block of the same format; the ranges must not overlap.
  void copy(const KvRowBlock& src, int64_t src_slot, int64_t slot, int64_t count);
  // Slots [slot, slot + count) as attention reads them.
  KvSpan span(int64_t slot, int64_t count) const;
  // Faults in the memory of slots [slot, slot + count) (one
  // madvise(MADV_POPULATE_WRITE), or where the kernel lacks it each page
  // rewritten with what it holds; slots already written keep their values):
  // a block made without `prefault` takes its page faults slot range by
  // slot range, as its slots come into use.
  void prefault(int64_t slot, int64_t count);
  // Gives the memory of every slot back to the system (the whole pages
  // inside the block; they read as zeros when next touched): for when no
  // slot holds anything the store will read again.
  void release_memory();

  int64_t capacity() const { return capacity_; }
  int64_t nbytes() const { return static_cast<int64_t>(memory_.nbytes()); }
  // Bytes one token's K and V take, scales included.
  static int64_t token_bytes(KvElement element, int num_heads, int head_dim);

 private:
  std::byte* k_elems(int64_t slot) const;
  std::byte* v_elems(int64_t slot) const;
  float* k_scales(int64_t slot) const;
  float* v_scales(int64_t slot) const;

  KvElement element_;
  int num_heads_;
  int head_dim_;
  int64_t capacity_;
  int64_t row_bytes_;      // one token's K (or V) elements
  int64_t scales_offset_;  // bytes from the start to the K scales
  Tensor memory_;          // uint8
};

// What the CPU stores' append() takes: k and v as [rows][num_heads][head_dim]
// on the CPU, both float32 or both (the bf16 mode's) bfloat16; throws
// lingbot::Error otherwise.
void check_appended_rows(const Tensor& k, const Tensor& v, int64_t rows, const kv::TokenLayout& layout);
// Rows [first, first + count) of such k and v into block slots [slot, slot + count).
void write_token_rows(KvRowBlock& block, int64_t slot, const Tensor& k, const Tensor& v, int64_t first,
                      int64_t count);

}  // namespace lingbot::cpu
