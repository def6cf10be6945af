// The dense key source as the attention kernels see it (CUDA sources only):
// the keys of one (group, head) are rows [group * n, (group + 1) * n) of k and v
// (DenseKeys, attention_launch.h), head offset applied. The same interface as
// PagedView (paged_key_view.cuh), so every kernel is written once for both:
// random access (k_row), a Cursor that walks keys in order, and Spans of
// keys addressed without a cursor.
#pragma once

#include "backend/cuda/attention/attention_launch.h"

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

}  // namespace lingbot::cuda::attn
