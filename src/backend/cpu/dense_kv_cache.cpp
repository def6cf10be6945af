#include "backend/cpu/dense_kv_cache.h"

#include "backend/cpu/kv_spans.h"

#include <algorithm>

namespace lingbot::cpu {

namespace {
constexpr int64_t kSlabFloats = int64_t{1} << 20;  // ~4 MiB: many small frames per slab, large frames alone
}

DenseKvCache::DenseKvCache(const kv::CacheConfig& config, const kv::TokenLayout& layout, int num_blocks,
                           AttentionProducts products)
    : products_(products),
      config_(config),
      layout_(layout),
      window_(config, layout),
      steps_(num_blocks),
      slots_(static_cast<int32_t>(
          std::clamp<int64_t>(kSlabFloats / (2 * int64_t{layout.tokens_per_frame()} * layout.row_floats()), 1,
                              int64_t{1} << 16))) {
  frames_per_slab_ = slots_.growth_pages();
  retained_chunk_tokens_ = std::max<int64_t>(1, kSlabFloats / (2 * layout.row_floats()));
  element_ = kv_element_for(config.dtype);
  blocks_.resize(static_cast<size_t>(num_blocks));
}

const KvRowBlock& DenseKvCache::slab_of(const BlockMemory& mem, int32_t slot) const {
  return mem.slabs[static_cast<size_t>(slot / frames_per_slab_)];
}

KvRowBlock& DenseKvCache::slab_of(BlockMemory& mem, int32_t slot) const {
  return mem.slabs[static_cast<size_t>(slot / frames_per_slab_)];
}

int64_t DenseKvCache::first_token(int32_t slot) const {
  return int64_t{slot % frames_per_slab_} * layout_.tokens_per_frame();
}

void DenseKvCache::ensure_slabs(BlockMemory& mem, int32_t slots) {
  while (static_cast<int64_t>(mem.slabs.size()) * frames_per_slab_ < slots) {
    mem.slabs.emplace_back(element_, layout_.num_heads, layout_.head_dim,
                           int64_t{frames_per_slab_} * layout_.tokens_per_frame(), /*prefault=*/false);
    bytes_reserved_ += mem.slabs.back().nbytes();
    bytes_allocated_total_ += mem.slabs.back().nbytes();
  }
}

void DenseKvCache::ensure_retained(BlockMemory& mem, int64_t tokens) {
  while (static_cast<int64_t>(mem.retained.size()) * retained_chunk_tokens_ < tokens) {
    mem.retained.emplace_back(element_, layout_.num_heads, layout_.head_dim, retained_chunk_tokens_,
                              /*prefault=*/false);
    bytes_reserved_ += mem.retained.back().nbytes();
    bytes_allocated_total_ += mem.retained.back().nbytes();
  }
}

void DenseKvCache::begin_step(int num_frames, bool store) {
  steps_.check_begin(num_frames);
  step_slots_.clear();
  step_evicted_.clear();
  saved_slot_pool_ = slots_.pool_pages();
  for (int i = 0; i < num_frames; ++i) step_slots_.push_back(slots_.allocate());
  if (store) {
    step_retained_start_ = window_.retained_tokens();
    const auto& evictions = window_.store(num_frames);
    frame_slots_.insert(frame_slots_.end(), step_slots_.begin(), step_slots_.end());
    // The window erased a contiguous run of list positions; mirror it.
    const size_t first = config_.include_scale_frames ? static_cast<size_t>(config_.scale_frames) : 0;
    if (!evictions.empty()) {
      LB_ASSERT(first + evictions.size() <= frame_slots_.size());
      for (size_t e = 0; e < evictions.size(); ++e) {
        step_evicted_.push_back({frame_slots_[first + e], evictions[e].retained});
      }
      const auto begin = frame_slots_.begin() + static_cast<std::ptrdiff_t>(first);
      frame_slots_.erase(begin, begin + static_cast<std::ptrdiff_t>(evictions.size()));
    }
    LB_ASSERT(frame_slots_.size() == window_.frames().size());
  }
  steps_.begin(num_frames, store);
}

void DenseKvCache::append(int block, const Tensor& k, const Tensor& v) {
  steps_.check_append(block);
  const int tpf = layout_.tokens_per_frame();
  const int64_t rows = int64_t{steps_.num_frames()} * tpf;
  check_appended_rows(k, v, rows, layout_);

  BlockMemory& mem = blocks_[static_cast<size_t>(block)];
  ensure_slabs(mem, slots_.pool_pages());
  for (size_t i = 0; i < step_slots_.size(); ++i) {
    const int32_t slot = step_slots_[i];
    write_token_rows(slab_of(mem, slot), first_token(slot), k, v, static_cast<int64_t>(i) * tpf, tpf);
  }

  if (steps_.store()) {
    // Evicted frames leave their first `retained` tokens (the specials) behind.
    LB_ASSERT(mem.retained_written == step_retained_start_);
    const int retained = window_.retained_tokens_per_frame();
    ensure_retained(mem, window_.retained_tokens());
    int64_t at = step_retained_start_;
    for (const Evicted& e : step_evicted_) {
      if (!e.retained) continue;
      for (int t = 0; t < retained; ++t, ++at) {
        KvRowBlock& chunk = mem.retained[static_cast<size_t>(at / retained_chunk_tokens_)];
        chunk.copy(slab_of(mem, e.slot), first_token(e.slot) + t, at % retained_chunk_tokens_, 1);
      }
    }
    LB_ASSERT(at == window_.retained_tokens());
    mem.retained_written = at;
  }
  steps_.mark_appended(block);
}

std::vector<KvSpan> DenseKvCache::visible_spans(int block) const {
  const BlockMemory& mem = blocks_[static_cast<size_t>(block)];
  std::vector<KvSpan> spans;

  const int64_t retained = window_.retained_tokens();
  LB_ASSERT(retained <= mem.retained_written);
  for (int64_t start = 0; start < retained; start += retained_chunk_tokens_) {
    const KvRowBlock& chunk = mem.retained[static_cast<size_t>(start / retained_chunk_tokens_)];
    spans.push_back(chunk.span(0, std::min(retained_chunk_tokens_, retained - start)));
  }

  // Listed frames, then a non-keyframe's own frames. Consecutive slots of one
  // slab are contiguous, so they extend the previous span.
  const int tpf = layout_.tokens_per_frame();
  int32_t previous = -2;
  auto add_frame = [&](int32_t slot) {
    const bool extends = slot == previous + 1 && slot % frames_per_slab_ != 0 && !spans.empty();
    if (extends) {
      spans.back().tokens += tpf;
    } else {
      spans.push_back(slab_of(mem, slot).span(first_token(slot), tpf));
    }
    previous = slot;
  };
  for (int32_t slot : frame_slots_) add_frame(slot);
  if (steps_.in_step() && !steps_.store()) {
    for (int32_t slot : step_slots_) add_frame(slot);
  }
  return spans;
}

void DenseKvCache::attend(int block, const Tensor& q, Tensor& out) {
  steps_.check_attend(block);
  const std::vector<KvSpan> spans = visible_spans(block);
  attend_spans(layout_, spans, q, out, products_);
}

std::pair<Tensor, Tensor> DenseKvCache::gather_visible(int block) const {
  LB_CHECK(block >= 0 && block < num_blocks(), "kv cache: gather_visible: block {} out of range [0, {})", block,
           num_blocks());
  if (steps_.in_step()) steps_.check_attend(block);
  if (blocks_[static_cast<size_t>(block)].slabs.empty()) {  // nothing stored yet
    return gather_spans(layout_, {});
  }
  const std::vector<KvSpan> spans = visible_spans(block);
  return gather_spans(layout_, spans);
}

void DenseKvCache::end_step() {
  steps_.check_end();
  if (steps_.store()) {
    for (const Evicted& e : step_evicted_) slots_.release(e.slot);
  } else {
    for (auto it = step_slots_.rbegin(); it != step_slots_.rend(); ++it) slots_.release(*it);
    slots_.shrink_to(saved_slot_pool_);
  }
  step_slots_.clear();
  step_evicted_.clear();
  steps_.end();
}

void DenseKvCache::reset() {
  window_.reset();
  steps_.reset();
  slots_.reset();
  frame_slots_.clear();
  step_slots_.clear();
  step_evicted_.clear();
  // The slabs and retained chunks stay for the next stream (its slots get
  // the same ids from the emptied pool); only the write marks restart.
  for (BlockMemory& mem : blocks_) mem.retained_written = 0;
}

kv::CacheStats DenseKvCache::stats() const {
  kv::CacheStats s;
  s.layout = kv::Layout::Dense;
  s.num_blocks = num_blocks();
  s.frames_seen = steps_.frames_seen();
  window_.report(s);
  const int64_t token_bytes = KvRowBlock::token_bytes(element_, layout_.num_heads, layout_.head_dim);
  s.bytes_in_use = s.visible_tokens * token_bytes * num_blocks();
  s.bytes_reserved = bytes_reserved_;
  s.bytes_allocated_total = bytes_allocated_total_;
  s.storage = kv_element_name(element_);
  return s;
}

}  // namespace lingbot::cpu
