// Where attention reads a page: the paged key source as the attention
// kernels see it (CUDA sources only). Key j of a block is slot j % page_size
// of visible page j / page_size of the cache's device table (kv_table.h); the
// page pointer comes from the table, the division from a multiply-shift
// (fast_div.h). k_row_simple uses plain `/` and `%`: the naive twin's
// independent address path. A tile that lies inside one page can also be
// copied as TMA boxes through the cache's tensor maps (tensor_map.h).
#pragma once

#include "backend/cuda/attention/attention_launch.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace lingbot::cuda::attn {

template <typename T>
struct PagedView {
  struct Cursor {
    int32_t page;  // index into the visible page list
    int32_t slot;
    __device__ int32_t slot_in_span() const { return slot; }
  };
  char* const* pages;
  const TensorMap* maps;    // one per pool chunk, or null (tensor_map.h)
  const int32_t* page_ids;  // [visible pages] pool page ids (with maps)
  int32_t pages_per_chunk;
  int32_t box_rows;         // slots per TMA copy
  int32_t num_maps;
  int32_t block;
  int64_t offset;  // block * block_stride + head * head_dim * sizeof(T)
  int64_t row_bytes;
  int64_t v_offset;
  FastDiv div;
  int32_t page_size;
  int32_t nk;
  __device__ int32_t num_keys() const { return nk; }
  __device__ Cursor seek(int32_t key) const {
    const int32_t p = div.div(key);
    return {p, key - p * page_size};
  }
  __device__ void advance(Cursor& c, int32_t by) const {
    c.slot += by;
    while (c.slot >= page_size) {  // at most once when page_size >= by
      c.slot -= page_size;
      ++c.page;
    }
  }
  __device__ const T* k_at(Cursor c) const {
    return reinterpret_cast<const T*>(pages[c.page] + offset + c.slot * row_bytes);
  }
  __device__ const T* v_at(Cursor c) const {
    return reinterpret_cast<const T*>(pages[c.page] + offset + v_offset + c.slot * row_bytes);
  }
  __device__ const T* k_row(int32_t key) const { return k_at(seek(key)); }
  __device__ const T* v_row(int32_t key) const { return v_at(seek(key)); }
  __device__ const T* k_row_simple(int32_t key) const {
    return reinterpret_cast<const T*>(pages[key / page_size] + offset + (key % page_size) * row_bytes);
  }
  __device__ const T* v_row_simple(int32_t key) const {
    return reinterpret_cast<const T*>(pages[key / page_size] + offset + v_offset + (key % page_size) * row_bytes);
  }
  // Span: the keys c + delta for 0 <= delta < span_keys() lie in c's page or
  // the next, so two page-table reads per span address them all (a
  // producer addressing a whole tile this way does two reads, not one per
  // row). next_page: whether any of them is in the next page (only then is
  // it read: it may be past the visible list).
  struct Span {
    const char* base0;
    const char* base1;
    int32_t slot0;
  };
  __device__ int32_t span_keys() const { return page_size; }
  __device__ Span span_from(Cursor c, bool next_page) const {
    const char* b0 = pages[c.page] + offset;
    return {b0, next_page ? pages[c.page + 1] + offset : b0, c.slot};
  }
  __device__ const T* k_in(const Span& sp, int32_t delta) const {
    const int32_t slot = sp.slot0 + delta;
    const bool next = slot >= page_size;
    return reinterpret_cast<const T*>((next ? sp.base1 : sp.base0) + (next ? slot - page_size : slot) * row_bytes);
  }
  __device__ const T* v_in(const Span& sp, int32_t delta) const {
    return reinterpret_cast<const T*>(reinterpret_cast<const char*>(k_in(sp, delta)) + v_offset);
  }
  // TMA: the keys [first, first + box) of one page are one box of the
  // page's chunk map: K at (0, head, slot, kv_page), V at kv_page + 1.
  static constexpr bool kTma = true;
  struct TmaTile {
    const void* map;
    int32_t slot, kv_page;
  };
  __device__ bool tma_ready(int32_t box) const { return maps != nullptr && box_rows == box; }
  // Whether keys [first, first + box) lie in one page (and are all visible).
  __device__ bool tma_fits(int32_t first, int32_t box) const {
    const int32_t p = div.div(first);
    return first + box <= nk && first - p * page_size + box <= page_size;
  }
  __device__ TmaTile tma_tile(int32_t first) const {
    const int32_t p = div.div(first);
    const int32_t id = page_ids[p];
    const int32_t chunk = id / pages_per_chunk;
    return {maps + chunk, first - p * page_size, 2 * (block * pages_per_chunk + id - chunk * pages_per_chunk)};
  }
  __device__ int32_t tma_maps() const { return num_maps; }
  __device__ const void* tma_map(int32_t c) const { return maps + c; }
};

template <typename T>
__device__ __forceinline__ PagedView<T> make_view(const PagedKeys<T>& keys, int32_t /*group*/, int32_t head) {
  const KvTableHeader& t = *keys.table;
  PagedView<T> w;
  w.pages = t.page_ptrs;
  w.maps = t.tensor_maps;
  w.page_ids = t.page_ids;
  w.pages_per_chunk = t.pages_per_chunk;
  w.box_rows = t.tma_box_rows;
  w.num_maps = t.num_tensor_maps;
  w.block = keys.block;
  w.offset = int64_t{keys.block} * t.block_stride + int64_t{head} * keys.head_dim * static_cast<int64_t>(sizeof(T));
  w.row_bytes = t.row_bytes;
  w.v_offset = t.v_offset;
  w.div = t.page_div;
  w.page_size = t.page_size;
  w.nk = t.num_keys;
  return w;
}

}  // namespace lingbot::cuda::attn
