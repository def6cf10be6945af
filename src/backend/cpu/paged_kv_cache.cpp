#include "backend/cpu/paged_kv_cache.h"

#include "backend/cpu/kv_spans.h"
#include "backend/cpu/parallel.h"

#include <cstring>

namespace lingbot::cpu {

PagedKvCache::PagedKvCache(const kv::CacheConfig& config, const kv::TokenLayout& layout, int num_blocks)
    : config_(config), layout_(layout), planner_(config, layout), steps_(num_blocks) {
  geometry_ = {planner_.page_size(), layout.num_heads, layout.head_dim};
  blocks_.resize(static_cast<size_t>(num_blocks));
}

float* PagedKvCache::page_k(const BlockMemory& mem, int32_t page) const {
  const int32_t per_chunk = config_.pool_growth_pages;
  const Tensor& chunk = mem.chunks[static_cast<size_t>(page / per_chunk)];
  return chunk.f32() + int64_t{page % per_chunk} * geometry_.page_elems();
}

void PagedKvCache::ensure_pages(BlockMemory& mem, int32_t pages) {
  const int32_t per_chunk = config_.pool_growth_pages;
  while (static_cast<int64_t>(mem.chunks.size()) * per_chunk < pages) {
    mem.chunks.push_back(
        Tensor::empty({per_chunk, 2, geometry_.page_size, geometry_.num_heads, geometry_.head_dim}));
    bytes_reserved_ += static_cast<int64_t>(mem.chunks.back().nbytes());
    parallel_first_touch(mem.chunks.back().f32(), mem.chunks.back().numel());
  }
}

void PagedKvCache::begin_step(int num_frames, bool store) {
  steps_.check_begin(num_frames);
  planner_.begin_step(num_frames, store);
  steps_.begin(num_frames, store);
}

void PagedKvCache::append(int block, const Tensor& k, const Tensor& v) {
  steps_.check_append(block);
  const kv::StepPlan& plan = planner_.plan();
  const int64_t rows = int64_t{plan.num_frames} * layout_.tokens_per_frame();
  kv::check_token_tensor(k, rows, layout_, "append: k");
  kv::check_token_tensor(v, rows, layout_, "append: v");

  BlockMemory& mem = blocks_[static_cast<size_t>(block)];
  ensure_pages(mem, plan.pool_pages);
  const int64_t row = geometry_.token_stride();
  const int64_t v_off = geometry_.v_offset();
  for (const kv::RowWrite& w : plan.writes) {
    float* dst = page_k(mem, w.page) + int64_t{w.slot} * row;
    const size_t bytes = static_cast<size_t>(int64_t{w.count} * row) * sizeof(float);
    parallel_copy(dst, k.f32() + w.src_row * row, bytes);
    parallel_copy(dst + v_off, v.f32() + w.src_row * row, bytes);
  }
  for (const kv::SlotCopy& c : plan.copies) {
    const float* src = page_k(mem, c.src_page) + int64_t{c.src_slot} * row;
    float* dst = page_k(mem, c.dst_page) + int64_t{c.dst_slot} * row;
    const size_t bytes = static_cast<size_t>(int64_t{c.count} * row) * sizeof(float);
    std::memcpy(dst, src, bytes);
    std::memcpy(dst + v_off, src + v_off, bytes);
  }
  steps_.mark_appended(block);
}

std::vector<KvSpan> PagedKvCache::spans_of(int block, const kv::PageTable& table) const {
  const BlockMemory& mem = blocks_[static_cast<size_t>(block)];
  std::vector<KvSpan> spans;
  spans.reserve(table.page_ids.size());
  for (int32_t i = 0; i < table.num_pages(); ++i) {
    const float* k = page_k(mem, table.page_ids[static_cast<size_t>(i)]);
    spans.push_back({k, k + geometry_.v_offset(), table.page_len(i)});
  }
  return spans;
}

void PagedKvCache::attend(int block, const Tensor& q, Tensor& out) {
  steps_.check_attend(block);
  const std::vector<KvSpan> spans = spans_of(block, planner_.plan().visible);
  attend_spans(layout_, spans, q, out);
}

std::pair<Tensor, Tensor> PagedKvCache::gather_visible(int block) const {
  LB_CHECK(block >= 0 && block < num_blocks(), "kv cache: gather_visible: block {} out of range [0, {})", block,
           num_blocks());
  if (steps_.in_step()) {
    steps_.check_attend(block);
    return gather_spans(layout_, spans_of(block, planner_.plan().visible));
  }
  return gather_spans(layout_, spans_of(block, planner_.stored_table()));
}

void PagedKvCache::end_step() {
  steps_.check_end();
  planner_.end_step();
  steps_.end();
}

void PagedKvCache::reset() {
  planner_.reset();
  steps_.reset();
  const size_t n = blocks_.size();
  blocks_.clear();
  blocks_.resize(n);
  bytes_reserved_ = 0;
}

kv::CacheStats PagedKvCache::stats() const {
  kv::CacheStats s;
  s.layout = kv::Layout::Paged;
  s.num_blocks = num_blocks();
  s.frames_seen = steps_.frames_seen();
  planner_.window().report(s);
  planner_.report(s);
  const int64_t page_bytes = geometry_.page_elems() * static_cast<int64_t>(sizeof(float));
  s.bytes_in_use = s.pages_in_use * page_bytes * num_blocks();
  s.bytes_reserved = bytes_reserved_;
  return s;
}

}  // namespace lingbot::cpu
