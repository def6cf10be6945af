// Dense KV store on the CPU (float32, bf16 or fp8 storage): upstream's SDPA
// cache, the truth.
//
// Per block, exactly the two lists of the semantics (kv/window_policy.h):
//   frames:   every token of each listed frame, in a frame slot
//             [tokens_per_frame][num_heads][head_dim] (K and V)
//   retained: the special tokens of evicted frames, appended in eviction order
// attend() reads retained tokens, then the listed frames, then (non-keyframe)
// the step's own frames, all in place.
//
// Memory: frame slots live in slabs of `frames_per_slab` slots, each slab a
// KvRowBlock (kv_rows.h) of frames_per_slab * tokens_per_frame token slots,
// so that frames in consecutive slots are contiguous and attention reads
// them as one span (the camera head's 1-token frames). Slot ids come from a
// PagePool (growth = one slab), shared by all blocks; a non-keyframe's
// frames take temporary slots returned at end_step. Retained tokens live in
// KvRowBlocks of `retained_chunk_tokens`, copied from their frame as stored
// (an fp8 token keeps its codes and scales, exactly as the paged store's
// slot copies do). Everything is allocated on first use, per block, and
// faulted in as it is written (the blocks are sized for small layouts too,
// where most of a slab may never be touched); reset() keeps it for the next
// stream.
#pragma once

#include "backend/cpu/attention.h"
#include "backend/cpu/kv_rows.h"
#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv/step_tracker.h"
#include "kv/window_policy.h"

#include <deque>
#include <vector>

namespace lingbot::cpu {

class DenseKvCache final : public kv::KvCache {
 public:
  // products: attention's arithmetic (the bf16 mode's stores take Bf16 on AMX CPUs).
  DenseKvCache(const kv::CacheConfig& config, const kv::TokenLayout& layout, int num_blocks,
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


 private:
  struct BlockMemory {
    std::vector<KvRowBlock> slabs;     // frames_per_slab frame slots each
    std::vector<KvRowBlock> retained;  // retained_chunk_tokens tokens each
    int64_t retained_written = 0;      // tokens written to `retained`
  };
  struct Evicted {
    int32_t slot;
    bool retained;
  };

  // The slab of a frame slot and the slot's first token in it.
  const KvRowBlock& slab_of(const BlockMemory& mem, int32_t slot) const;
  KvRowBlock& slab_of(BlockMemory& mem, int32_t slot) const;
  int64_t first_token(int32_t slot) const;
  void ensure_slabs(BlockMemory& mem, int32_t slots);
  void ensure_retained(BlockMemory& mem, int64_t tokens);
  // The visible keys of a block: retained, listed frames, then the step's temporary frames.
  std::vector<KvSpan> visible_spans(int block) const;

  AttentionProducts products_;
  kv::CacheConfig config_;
  kv::TokenLayout layout_;
  kv::WindowPolicy window_;
  kv::StepTracker steps_;
  kv::PagePool slots_;
  int32_t frames_per_slab_ = 1;
  int64_t retained_chunk_tokens_ = 1;
  KvElement element_;

  std::deque<int32_t> frame_slots_;  // slot of each listed frame, list order
  std::vector<BlockMemory> blocks_;
  int64_t bytes_reserved_ = 0;         // all blocks' slabs and retained chunks
  int64_t bytes_allocated_total_ = 0;  // every one ever made (reset keeps them)

  // The open step.
  std::vector<int32_t> step_slots_;  // slots of the step's frames (stored or temporary), frame order
  std::vector<Evicted> step_evicted_;
  int64_t step_retained_start_ = 0;  // where this step's retained tokens begin
  int32_t saved_slot_pool_ = 0;
};

}  // namespace lingbot::cpu
