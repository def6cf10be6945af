#include "backend/cpu/kv_rows.h"

#include "backend/cpu/parallel.h"
#include "core/half.h"
#include "core/memory_pages.h"
#include "kv/fp8_e4m3.h"
#include "kv/step_tracker.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace lingbot::cpu {

namespace {

int64_t element_bytes(KvElement e) {
  switch (e) {
    case KvElement::F32: return 4;
    case KvElement::Bf16: return 2;
    case KvElement::Fp8: return 1;
  }
  return 0;
}

constexpr int64_t round_up_64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Writes of fewer rows than this run on the calling thread (a camera-head
// token, a frame's specials): waking the team costs more than the copy.
constexpr int64_t kMinParallelRows = 64;

}  // namespace

KvElement kv_element_for(kv::KvDtype dtype) {
  switch (dtype) {
    case kv::KvDtype::Auto: return KvElement::F32;
    case kv::KvDtype::Bf16: return KvElement::Bf16;
    case kv::KvDtype::Fp8: return KvElement::Fp8;
  }
  return KvElement::F32;
}

std::string_view kv_element_name(KvElement element) {
  switch (element) {
    case KvElement::F32: return "float32";
    case KvElement::Bf16: return "bfloat16";
    case KvElement::Fp8: return "e4m3";
  }
  return "?";
}

int64_t KvRowBlock::token_bytes(KvElement element, int num_heads, int head_dim) {
  const int64_t scales = element == KvElement::Fp8 ? int64_t{num_heads} * 4 : 0;
  return 2 * (int64_t{num_heads} * head_dim * element_bytes(element) + scales);
}

KvRowBlock::KvRowBlock(KvElement element, int num_heads, int head_dim, int64_t capacity, bool prefault)
    : element_(element), num_heads_(num_heads), head_dim_(head_dim), capacity_(capacity) {
  row_bytes_ = int64_t{num_heads} * head_dim * element_bytes(element);
  scales_offset_ = round_up_64(2 * capacity * row_bytes_);
  const int64_t scale_bytes = element == KvElement::Fp8 ? 2 * capacity * num_heads * int64_t{4} : 0;
  const int64_t total = round_up_64(scales_offset_ + scale_bytes);
  memory_ = Tensor::empty({total}, DType::U8);
  if (prefault) parallel_first_touch(static_cast<float*>(memory_.data()), total / 4);
}

void KvRowBlock::prefault(int64_t slot, int64_t count) {
  LB_ASSERT(slot >= 0 && count >= 0 && slot + count <= capacity_);
  // The kernel zeroes each new page as it maps it: split across the threads,
  // as first touch would be.
  const int64_t bytes = count * row_bytes_;
  constexpr int64_t kPiece = int64_t{256} << 10;
  const int64_t pieces = (bytes + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(static) if (pieces >= 4)
  for (int64_t i = 0; i < 2 * pieces; ++i) {
    std::byte* base = i < pieces ? k_elems(slot) : v_elems(slot);
    const int64_t from = (i % pieces) * kPiece;
    populate_for_write(base + from, std::min(kPiece, bytes - from));
  }
  if (element_ == KvElement::Fp8) {
    populate_for_write(reinterpret_cast<std::byte*>(k_scales(slot)), count * num_heads_ * int64_t{4});
    populate_for_write(reinterpret_cast<std::byte*>(v_scales(slot)), count * num_heads_ * int64_t{4});
  }
}

void KvRowBlock::release_memory() {
#if defined(__linux__)
  // Private anonymous memory: the pages come back zeroed when touched.
  const auto [lo, length] = whole_pages(memory_.data(), static_cast<int64_t>(memory_.nbytes()));
  if (length > 0) ::madvise(reinterpret_cast<void*>(lo), length, MADV_DONTNEED);
#endif
}

std::byte* KvRowBlock::k_elems(int64_t slot) const {
  return static_cast<std::byte*>(memory_.data()) + slot * row_bytes_;
}
std::byte* KvRowBlock::v_elems(int64_t slot) const { return k_elems(capacity_ + slot); }
float* KvRowBlock::k_scales(int64_t slot) const {
  return reinterpret_cast<float*>(static_cast<std::byte*>(memory_.data()) + scales_offset_) + slot * num_heads_;
}
float* KvRowBlock::v_scales(int64_t slot) const { return k_scales(capacity_ + slot); }

void KvRowBlock::write(int64_t slot, const float* k, const float* v, int64_t count) {
  LB_ASSERT(slot >= 0 && count >= 0 && slot + count <= capacity_);
  const int64_t row = int64_t{num_heads_} * head_dim_;
  if (element_ == KvElement::F32) {
    parallel_copy(k_elems(slot), k, static_cast<size_t>(count * row_bytes_));
    parallel_copy(v_elems(slot), v, static_cast<size_t>(count * row_bytes_));
    return;
  }
  // One item per token row of K or V.
#pragma omp parallel for schedule(static) if (count >= kMinParallelRows)
  for (int64_t item = 0; item < 2 * count; ++item) {
    const bool is_v = item >= count;
    const int64_t t = is_v ? item - count : item;
    const float* src = (is_v ? v : k) + t * row;
    std::byte* dst = is_v ? v_elems(slot + t) : k_elems(slot + t);
    if (element_ == KvElement::Bf16) {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t c = 0; c < row; ++c) out[c] = f32_to_bf16(src[c]);
    } else {
      auto* out = reinterpret_cast<uint8_t*>(dst);
      float* scales = is_v ? v_scales(slot + t) : k_scales(slot + t);
      for (int h = 0; h < num_heads_; ++h) {
        scales[h] = kv::quantise_e4m3(src + int64_t{h} * head_dim_, head_dim_, out + int64_t{h} * head_dim_);
      }
    }
  }
}

void KvRowBlock::write(int64_t slot, const uint16_t* k, const uint16_t* v, int64_t count) {
  LB_ASSERT(slot >= 0 && count >= 0 && slot + count <= capacity_);
  const int64_t row = int64_t{num_heads_} * head_dim_;
  if (element_ == KvElement::Bf16) {
    parallel_copy(k_elems(slot), k, static_cast<size_t>(count * row_bytes_));
    parallel_copy(v_elems(slot), v, static_cast<size_t>(count * row_bytes_));
    return;
  }
  // One item per token row of K or V, widened on the way (into the block for
  // float32, through one row of scratch per thread for fp8).
#pragma omp parallel if (count >= kMinParallelRows)
  {
    std::vector<float> widened(element_ == KvElement::Fp8 ? static_cast<size_t>(row) : 0);
#pragma omp for schedule(static)
    for (int64_t item = 0; item < 2 * count; ++item) {
      const bool is_v = item >= count;
      const int64_t t = is_v ? item - count : item;
      const uint16_t* src = (is_v ? v : k) + t * row;
      std::byte* dst = is_v ? v_elems(slot + t) : k_elems(slot + t);
      float* out = element_ == KvElement::F32 ? reinterpret_cast<float*>(dst) : widened.data();
      for (int64_t c = 0; c < row; ++c) out[c] = bf16_to_f32(src[c]);
      if (element_ == KvElement::Fp8) {
        float* scales = is_v ? v_scales(slot + t) : k_scales(slot + t);
        for (int h = 0; h < num_heads_; ++h) {
          scales[h] = kv::quantise_e4m3(out + int64_t{h} * head_dim_, head_dim_,
                                        reinterpret_cast<uint8_t*>(dst) + int64_t{h} * head_dim_);
        }
      }
    }
  }
}

void KvRowBlock::copy(const KvRowBlock& src, int64_t src_slot, int64_t slot, int64_t count) {
  LB_ASSERT(src.element_ == element_ && src.num_heads_ == num_heads_ && src.head_dim_ == head_dim_);
  LB_ASSERT(src_slot >= 0 && slot >= 0 && src_slot + count <= src.capacity_ && slot + count <= capacity_);
  const auto bytes = static_cast<size_t>(count * row_bytes_);
  std::memcpy(k_elems(slot), src.k_elems(src_slot), bytes);
  std::memcpy(v_elems(slot), src.v_elems(src_slot), bytes);
  if (element_ == KvElement::Fp8) {
    const auto scale_bytes = static_cast<size_t>(count * num_heads_) * sizeof(float);
    std::memcpy(k_scales(slot), src.k_scales(src_slot), scale_bytes);
    std::memcpy(v_scales(slot), src.v_scales(src_slot), scale_bytes);
  }
}

KvSpan KvRowBlock::span(int64_t slot, int64_t count) const {
  LB_ASSERT(slot >= 0 && count >= 0 && slot + count <= capacity_);
  KvSpan s{k_elems(slot), v_elems(slot), count, element_};
  if (element_ == KvElement::Fp8) {
    s.k_scale = k_scales(slot);
    s.v_scale = v_scales(slot);
  }
  return s;
}

void check_appended_rows(const Tensor& k, const Tensor& v, int64_t rows, const kv::TokenLayout& layout) {
  kv::check_token_tensor(k, rows, layout, "append: k", /*or_bf16=*/true);
  kv::check_token_tensor(v, rows, layout, "append: v", /*or_bf16=*/true);
  LB_CHECK(k.dtype() == v.dtype(), "kv cache: append: k is {} but v is {}", k.describe(), v.describe());
}

void write_token_rows(KvRowBlock& block, int64_t slot, const Tensor& k, const Tensor& v, int64_t first,
                      int64_t count) {
  const int64_t at = first * k.dim(1) * k.dim(2);
  if (k.dtype() == DType::BF16) {
    block.write(slot, k.data_as<const uint16_t>() + at, v.data_as<const uint16_t>() + at, count);
  } else {
    block.write(slot, k.f32() + at, v.f32() + at, count);
  }
}

}  // namespace lingbot::cpu
