// Device side of the attention kernels (CUDA sources only): views of the two
// key sources and small helpers.
//
// make_view(keys, group, head) gives a View with the number of keys and where
// key j's K and V head vectors live, by random access (k_row, with a
// multiply-shift division) or through a Cursor that walks the keys in order
// (the tensor-core kernel advances each cursor one tile at a time, which
// avoids a division per row). k_row_simple uses plain `/` and `%`: the naive
// twin's independent address path.
#pragma once

#include "backend/cuda/attention_launch.h"
#include "backend/cuda/cuda_check.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace lingbot::cuda::attn {

template <typename T>
struct DenseView {
  struct Cursor {
    int32_t key;
    __device__ int32_t slot_in_span() const { return 0; }
  };
  const T* k0;  // group's first key row, head offset applied
  const T* v0;
  int64_t stride;
  int32_t nk;
  __device__ int32_t num_keys() const { return nk; }
  __device__ Cursor seek(int32_t key) const { return {key}; }
  __device__ void advance(Cursor& c, int32_t by) const { c.key += by; }
  __device__ const T* k_at(Cursor c) const { return k0 + c.key * stride; }
  __device__ const T* v_at(Cursor c) const { return v0 + c.key * stride; }
  __device__ const T* k_row(int32_t key) const { return k0 + key * stride; }
  __device__ const T* v_row(int32_t key) const { return v0 + key * stride; }
  __device__ const T* k_row_simple(int32_t key) const { return k_row(key); }
  __device__ const T* v_row_simple(int32_t key) const { return v_row(key); }
  // Span: the keys c + delta for 0 <= delta < span_keys(), addressed
  // without walking a cursor (see PagedView).
  struct Span {
    const T* k;
    const T* v;
  };
  __device__ int32_t span_keys() const { return 1 << 30; }
  __device__ Span span_from(Cursor c, bool /*next_page*/) const { return {k_at(c), v_at(c)}; }
  __device__ const T* k_in(const Span& sp, int32_t delta) const { return sp.k + delta * stride; }
  __device__ const T* v_in(const Span& sp, int32_t delta) const { return sp.v + delta * stride; }
  static constexpr bool kTma = false;  // no tensor maps for dense keys (see PagedView)
};

template <typename T>
__device__ __forceinline__ DenseView<T> make_view(const DenseKeys<T>& keys, int32_t group, int32_t head) {
  const int64_t first = int64_t{group} * keys.n * keys.stride + int64_t{head} * keys.head_dim;
  return {keys.k + first, keys.v + first, keys.stride, keys.n};
}

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

__device__ __forceinline__ float fast_exp2(float x) {  // 2^x, relative error ~2^-22; exp2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Two floats -> bf16x2 with `lo` in the low half (the lower column index).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// P of a key tile (the lane's wgmma accumulator registers of S, 4 per
// 8-key atom, exponentiated in place) packed into the A fragments of
// O += P V: k-step kk covers keys 16 kk .. 16 kk + 15, i.e. atoms 2 kk and
// 2 kk + 1. Shared by the two warpgroup-MMA kernels (wgmma v1, wgmma-ws).
template <int kKSteps>
__device__ __forceinline__ void pack_p_fragments(const float (&s)[8 * kKSteps], uint32_t (&pa)[kKSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    pa[kk][0] = pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);  // atom 2kk, row lr
    pa[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);  // atom 2kk, row lr + 8
    pa[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);  // atom 2kk + 1, row lr
    pa[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);  // atom 2kk + 1, row lr + 8
  }
}

// Opts a kernel into more than 48 KiB of dynamic shared memory, once per
// kernel (a function attribute, not a stream operation: fine while a graph
// is being captured). Host code.
template <auto kKernel>
void allow_dynamic_smem(int bytes) {
  static const bool done = [bytes] {
    LB_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)done;
}

// The host side of the three tensor-core kernels (mma.sync, wgmma v1,
// wgmma-ws): a launch over tensor_core_grid() (`query_rows` per CTA) with
// `smem_bytes` of dynamic shared memory, and the kernel's resident CTAs per SM for the split choice
// (asked once per device; the query sees the shared-memory allowance).
template <auto kKernel, typename Keys>
void launch_tensor_core_kernel(const AttentionArgs<__nv_bfloat16>& args, const Keys& keys, int threads,
                               int smem_bytes, int query_rows, cudaStream_t stream) {
  if (smem_bytes > 0) allow_dynamic_smem<kKernel>(smem_bytes);
  kKernel<<<tensor_core_grid(args, query_rows), threads, smem_bytes, stream>>>(args, keys);
  LB_CUDA_CHECK_LAUNCH();
}

template <auto kKernel>
int tensor_core_ctas_per_sm(int threads, int smem_bytes) {
  static thread_local OccupancyCache cache;
  if (smem_bytes > 0) allow_dynamic_smem<kKernel>(smem_bytes);
  return resident_ctas_per_sm(cache, reinterpret_cast<const void*>(kKernel), threads, smem_bytes);
}

// ---- a warp's 16 query rows in the tensor-core fragment layouts ----------
// The three tensor-core kernels (mma.sync, wgmma v1, wgmma-ws) give each
// warp 16 query rows [first_row, first_row + 16) of the CTA's (group, head)
// in mma.sync's layouts, which wgmma's register fragments share: lane
// (lr = lane / 4, lc = lane % 4) holds rows lr and lr + 8.

// The A fragments of Q (head_dim 64 = 4 k-steps of 16): qf[kk][rh] and
// qf[kk][2 + rh] hold dims 16 kk + 2 lc (+1) and 16 kk + 8 + 2 lc (+1) of row
// lr + 8 rh; rows past a.rows are zeros.
__device__ __forceinline__ void load_q_fragments(const AttentionArgs<__nv_bfloat16>& a, int32_t group, int32_t head,
                                                 int32_t first_row, int lr, int lc, uint32_t (&qf)[4][4]) {
  constexpr int kD = 64;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    const int32_t r = first_row + lr + 8 * rh;
    const __nv_bfloat16* qrow = a.q + (int64_t{group} * a.rows + r) * a.row_stride() + int64_t{head} * kD;
    const bool valid = r < a.rows;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      qf[kk][rh] = valid ? *reinterpret_cast<const uint32_t*>(qrow + 16 * kk + 2 * lc) : 0u;
      qf[kk][2 + rh] = valid ? *reinterpret_cast<const uint32_t*>(qrow + 16 * kk + 8 + 2 * lc) : 0u;
    }
  }
}

// The epilogue: o(j, e) is the output accumulator of column 8 j + 2 lc + e % 2
// of row lr + 8 (e / 2) (j < 8 atoms of 8 dims), l and m the lane's partial
// row sums and the rows' maxima (exp2 domain). Completes the row sums over
// the 4 lanes of a row, then writes the normalised row (splits == 1) or this
// split's partial output and log-sum-exp for the combine kernel.
template <typename Acc>
__device__ __forceinline__ void store_rows(const AttentionArgs<__nv_bfloat16>& a, int32_t group, int32_t head,
                                           int32_t split, int32_t first_row, int lr, int lc, Acc o,
                                           const float (&l)[2], const float (&m)[2]) {
  constexpr int kD = 64;
#pragma unroll
  for (int rh = 0; rh < 2; ++rh) {
    float sum = l[rh];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int32_t r = first_row + lr + 8 * rh;
    if (r >= a.rows) continue;
    const int64_t i = int64_t{group} * a.rows + r;  // query row in q / out
    if (a.splits == 1) {
      __nv_bfloat16* orow = a.out + i * a.row_stride() + int64_t{head} * kD;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<uint32_t*>(orow + 8 * j + 2 * lc) = pack_bf16(o(j, 2 * rh) * inv, o(j, 2 * rh + 1) * inv);
      }
    } else {
      const int64_t ih = (int64_t{split} * a.total_rows() + i) * a.num_heads + head;
      float* prow = a.part_o + ih * kD;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<float2*>(prow + 8 * j + 2 * lc) = make_float2(o(j, 2 * rh) * inv, o(j, 2 * rh + 1) * inv);
      }
      if (lc == 0) a.part_lse[ih] = sum > 0.f ? m[rh] + log2f(sum) : -INFINITY;
    }
  }
}

// Key range [begin, end) of split `split` of `splits` over nk keys, cut in
// units of `granule` keys (a tile) so that only a split's last tile can be
// partial. Splits past the keys are empty (begin == end).
__device__ __forceinline__ void split_range(int32_t nk, int32_t splits, int32_t split, int32_t granule,
                                            int32_t& begin, int32_t& end) {
  const int32_t granules = (nk + granule - 1) / granule;
  const int32_t per_split = (granules + splits - 1) / splits;
  const int64_t b = int64_t{split} * per_split * granule;
  const int64_t e = b + int64_t{per_split} * granule;
  begin = static_cast<int32_t>(b < nk ? b : nk);
  end = static_cast<int32_t>(e < nk ? e : nk);
}

}  // namespace lingbot::cuda::attn
