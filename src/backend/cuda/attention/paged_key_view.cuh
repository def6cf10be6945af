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

// The fp8 cache's pages as the wgmma-ws producer reads them: the codes
// through a PagedView of bytes (a page's codes are [kv][slot][head][dim],
// one byte each, so the bf16 view's addressing holds with one-byte
// elements), and each slot's scale beside them: K's at byte
//   codes_bytes + slot * num_heads * 4 + head * 4
// of the page, V's scale_v_offset further on (kv/kv_fp8.h). No TMA: the
// cache has tensor maps only for bf16 pages.
struct PagedFp8View {
  using Codes = PagedView<uint8_t>;
  using Cursor = Codes::Cursor;
  using Span = Codes::Span;
  Codes codes;
  // From a slot's K code row (which the offset puts at the head's bytes) to
  // its K scale: codes_bytes - slot * row_bytes + slot * scale_row + head * 4
  // bytes, split into the part per slot and the rest.
  int64_t scale_from_codes;  // codes_bytes + head * 4 - head * head_dim
  int32_t scale_row;         // num_heads * 4
  int64_t scale_v_offset;
  static constexpr bool kTma = false;
  __device__ int32_t num_keys() const { return codes.num_keys(); }
  __device__ Cursor seek(int32_t key) const { return codes.seek(key); }
  __device__ void advance(Cursor& c, int32_t by) const { codes.advance(c, by); }
  __device__ int32_t span_keys() const { return codes.span_keys(); }
  __device__ Span span_from(Cursor c, bool next_page) const { return codes.span_from(c, next_page); }
  // Key delta of a span, or the key at a cursor: its K code row, K scale and
  // V scale (its V code row is codes.v_offset after the K row).
  struct Row {
    const uint8_t* k;
    const float* k_scale;
  };
  __device__ Row row_in(const Span& sp, int32_t delta) const {
    const int32_t slot = sp.slot0 + delta;
    const bool next = slot >= codes.page_size;
    const int32_t s = next ? slot - codes.page_size : slot;
    const char* page = next ? sp.base1 : sp.base0;
    return {reinterpret_cast<const uint8_t*>(page + s * codes.row_bytes),
            reinterpret_cast<const float*>(page + scale_from_codes + int64_t{s} * scale_row)};
  }
  __device__ Row row_at(Cursor c) const {
    const char* page = codes.pages[c.page] + codes.offset;
    return {reinterpret_cast<const uint8_t*>(page + c.slot * codes.row_bytes),
            reinterpret_cast<const float*>(page + scale_from_codes + int64_t{c.slot} * scale_row)};
  }
  __device__ const uint8_t* v_codes(const Row& r) const { return r.k + codes.v_offset; }
  __device__ const float* v_scale(const Row& r) const {
    return reinterpret_cast<const float*>(reinterpret_cast<const char*>(r.k_scale) + scale_v_offset);
  }
};

__device__ __forceinline__ PagedFp8View make_view(const PagedFp8Keys& keys, int32_t group, int32_t head) {
  const KvTableHeader& t = *keys.table;
  PagedFp8View w;
  w.codes = make_view(PagedKeys<uint8_t>{keys.table, keys.block, keys.head_dim}, group, head);
  w.codes.maps = nullptr;
  w.scale_from_codes = 2 * t.v_offset + int64_t{head} * 4 - int64_t{head} * keys.head_dim;
  w.scale_row = static_cast<int32_t>(t.row_bytes / keys.head_dim) * 4;
  w.scale_v_offset = t.scale_v_offset;
  return w;
}

}  // namespace lingbot::cuda::attn
