// Paged KV store on the CPU (float32, bf16 or fp8 storage): upstream's
// two-stream FlashInfer layout, executed from the PagePlanner's step plans
// (kv/page_planner.h).
//
// Per block, one page pool kept in chunks of `pool_growth_pages` pages, each
// chunk a KvRowBlock (kv_rows.h) of pool_growth_pages * page_size token
// slots, page p at slots [(p % chunk) * page_size, + page_size) of chunk
// p / chunk, so the pool grows without moving pages. append() executes the
// plan's row writes (encoding to the storage type) and slot copies (codes
// and scales as stored) for that block; attend() hands the visible pages to
// cpu::attention as one span per page, read in place. Nothing is allocated
// before the first step; a page's memory is faulted in when the page is
// first written; reset() keeps the chunks for the next stream but gives
// their memory back (the destructor frees them).
#pragma once

#include "backend/cpu/attention.h"
#include "backend/cpu/kv_rows.h"
#include "kv/kv_cache.h"
#include "kv/page_planner.h"
#include "kv/step_tracker.h"

#include <vector>

namespace lingbot::cpu {

class PagedKvCache final : public kv::KvCache {
 public:
  // products: attention's arithmetic (the bf16 mode's stores take Bf16 on AMX CPUs).
  PagedKvCache(const kv::CacheConfig& config, const kv::TokenLayout& layout, int num_blocks,
               AttentionProducts products = AttentionProducts::F32);

  void begin_step(int num_frames, bool store) override;
  void append(int block, const Tensor& k, const Tensor& v) override;
  void attend(int block, const Tensor& q, Tensor& out) override;
  void end_step() override;
  void reset() override;
  kv::CacheStats stats() const override;
  const kv::TokenLayout& layout() const override { return layout_; }
  const kv::CacheConfig& config() const override { return config_; }
  int num_blocks() const override { return steps_.num_blocks(); }
  bool in_step() const override { return steps_.in_step(); }
  std::pair<Tensor, Tensor> gather_visible(int block) const override;

  const kv::PagePlanner& planner() const { return planner_; }

 private:
  struct BlockMemory {
    std::vector<KvRowBlock> chunks;  // pool_growth_pages pages each
    std::vector<uint8_t> faulted;    // per page id: its memory was faulted in
  };

  // The chunk holding `page`, and the page's first slot in it.
  const KvRowBlock& chunk_of(const BlockMemory& mem, int32_t page) const;
  KvRowBlock& chunk_of(BlockMemory& mem, int32_t page) const;
  int64_t first_slot(int32_t page) const;
  void ensure_pages(BlockMemory& mem, int32_t pages);
  void fault_in(BlockMemory& mem, int32_t page) const;
  std::vector<KvSpan> spans_of(int block, const kv::PageTable& table) const;

  AttentionProducts products_;
  kv::CacheConfig config_;
  kv::TokenLayout layout_;
  kv::PagePlanner planner_;
  kv::StepTracker steps_;
  KvElement element_;
  std::vector<BlockMemory> blocks_;
  int64_t bytes_reserved_ = 0;         // all blocks' chunks
  int64_t bytes_allocated_total_ = 0;  // every chunk ever made (reset keeps them)
};

}  // namespace lingbot::cpu
