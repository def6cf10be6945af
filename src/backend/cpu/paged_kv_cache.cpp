#include "backend/cpu/paged_kv_cache.h"

#include "backend/cpu/kv_spans.h"
#include "backend/cpu/parallel.h"


namespace lingbot::cpu {

PagedKvCache::PagedKvCache(const kv::CacheConfig& config, const kv::TokenLayout& layout, int num_blocks,
                           AttentionProducts products)
    : products_(products),
      config_(config),
      layout_(layout),
      planner_(config, layout),
      steps_(num_blocks),
      element_(kv_element_for(config.dtype)) {
  blocks_.resize(static_cast<size_t>(num_blocks));
}

const KvRowBlock& PagedKvCache::chunk_of(const BlockMemory& mem, int32_t page) const {
  return mem.chunks[static_cast<size_t>(page / config_.pool_growth_pages)];
}

KvRowBlock& PagedKvCache::chunk_of(BlockMemory& mem, int32_t page) const {
  return mem.chunks[static_cast<size_t>(page / config_.pool_growth_pages)];
}

int64_t PagedKvCache::first_slot(int32_t page) const {
  return int64_t{page % config_.pool_growth_pages} * planner_.page_size();
}

void PagedKvCache::ensure_pages(BlockMemory& mem, int32_t pages) {
  const int32_t per_chunk = config_.pool_growth_pages;
  while (static_cast<int64_t>(mem.chunks.size()) * per_chunk < pages) {
    mem.chunks.emplace_back(element_, layout_.num_heads, layout_.head_dim, int64_t{per_chunk} * planner_.page_size(),
                             /*prefault=*/false);
    bytes_reserved_ += mem.chunks.back().nbytes();
    bytes_allocated_total_ += mem.chunks.back().nbytes();
  }
}

void PagedKvCache::fault_in(BlockMemory& mem, int32_t page) const {
  // A page's memory is faulted in before its first write (in one call,
  // KvRowBlock::prefault), not when its chunk is made: the pool grows by
  // several pages at a time, and the pages no frame has used yet take no
  // memory.
  if (mem.faulted.size() <= static_cast<size_t>(page)) mem.faulted.resize(static_cast<size_t>(page) + 1, 0);
  if (mem.faulted[static_cast<size_t>(page)] != 0) return;
  chunk_of(mem, page).prefault(first_slot(page), planner_.page_size());
  mem.faulted[static_cast<size_t>(page)] = 1;
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
  check_appended_rows(k, v, rows, layout_);

  BlockMemory& mem = blocks_[static_cast<size_t>(block)];
  ensure_pages(mem, plan.pool_pages);
  for (const kv::RowWrite& w : plan.writes) fault_in(mem, w.page);
  for (const kv::SlotCopy& c : plan.copies) fault_in(mem, c.dst_page);
  for (const kv::RowWrite& w : plan.writes) {
    write_token_rows(chunk_of(mem, w.page), first_slot(w.page) + w.slot, k, v, w.src_row, w.count);
  }
  for (const kv::SlotCopy& c : plan.copies) {
    chunk_of(mem, c.dst_page).copy(chunk_of(mem, c.src_page), first_slot(c.src_page) + c.src_slot, first_slot(c.dst_page) + c.dst_slot,
             c.count);
  }
  steps_.mark_appended(block);
}

std::vector<KvSpan> PagedKvCache::spans_of(int block, const kv::PageTable& table) const {
  const BlockMemory& mem = blocks_[static_cast<size_t>(block)];
  std::vector<KvSpan> spans;
  spans.reserve(table.page_ids.size());
  for (int32_t i = 0; i < table.num_pages(); ++i) {
    const int32_t page = table.page_ids[static_cast<size_t>(i)];
    spans.push_back(chunk_of(mem, page).span(first_slot(page), table.page_len(i)));
  }
  return spans;
}

void PagedKvCache::attend(int block, const Tensor& q, Tensor& out) {
  steps_.check_attend(block);
  const std::vector<KvSpan> spans = spans_of(block, planner_.plan().visible);
  attend_spans(layout_, spans, q, out, products_);
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
  // The chunks stay allocated (the next stream's pages get the same ids from
  // the emptied pool), but their memory goes back to the system: the next
  // stream faults in only the pages it uses, instead of every page the
  // longest stream so far used (a benchmark's warm-up stream, say).
  for (BlockMemory& mem : blocks_) {
    for (KvRowBlock& chunk : mem.chunks) chunk.release_memory();
    mem.faulted.assign(mem.faulted.size(), 0);
  }
}

kv::CacheStats PagedKvCache::stats() const {
  kv::CacheStats s;
  s.layout = kv::Layout::Paged;
  s.num_blocks = num_blocks();
  s.frames_seen = steps_.frames_seen();
  planner_.window().report(s);
  planner_.report(s);
  const int64_t page_bytes =
      KvRowBlock::token_bytes(element_, layout_.num_heads, layout_.head_dim) * planner_.page_size();
  s.bytes_in_use = s.pages_in_use * page_bytes * num_blocks();
  s.bytes_reserved = bytes_reserved_;
  s.bytes_allocated_total = bytes_allocated_total_;
  s.storage = kv_element_name(element_);
  return s;
}

}  // namespace lingbot::cpu
