// The paged layout's policy: where every token row goes, which pages are
// freed, and the visible page table, built ONCE per step for all blocks.
//
// Pure bookkeeping (no K/V data, no device): begin_step() returns a StepPlan
// that any store (CPU float32 here, a CUDA store later) executes per block
// without knowing the semantics: write the step's rows where `writes` say,
// then do `copies`, then attend over `visible`.
//
// Two streams share one page pool (ids from PagePool), as in upstream's
// FlashInfer manager (lingbot_map/layers/flashinfer_cache.py):
//   frame pages:   one page per listed frame, holding the frame's "riders";
//                  the first S (scale) frames' pages are pinned, the others
//                  are recycled to the free list when their frame is evicted.
//   special stream: append-only, packed densely across pages, never freed.
// Visible order: frame pages in list order (scale, then window), then the
// special pages, so only the last page can be partial.
//
// Which rows of a frame go where. A token goes to the special stream at the
// moment it is known to stay visible until reset; tokens that may still
// become invisible ride in their frame's page (slots 0.. in row order):
//   rows [0, stream_tokens_per_frame()) -> special stream at append time
//   rows [stream_tokens_per_frame(), tokens_per_frame) -> the frame's page
// with stream_tokens_per_frame() =
//   tokens_per_frame      if the cache never evicts (1-token frames)
//   retained per frame    if include_scale_frames (every frame's specials end
//                         up permanent: scale frames are pinned, all others
//                         are evicted with retention): 6 by default (exactly
//                         upstream's layout: page = the 972 patches), 1 with
//                         camera_only (page = 5 specials + patches), 0 with
//                         cross_frame_special = false (page = whole frame)
//   0                     if !include_scale_frames (the quirk drops some
//                         frames without retention; which ones depends on
//                         future steps). The page holds the whole frame and,
//                         when a frame is evicted WITH retention, its retained
//                         specials are copied from its page into the special
//                         stream (SlotCopy) before the page is freed.
// page_size = riders per frame (no padding), or kStreamOnlyPageSize when no
// token rides (every token goes to the stream).
//
// Order inside a step (so a store can execute blindly): all pages the step
// needs (new frame pages, stream pages) are allocated BEFORE any page of an
// evicted frame is released, so a write or copy destination is never a page
// being read by a copy. A frame evicted in the very step that stores it (more
// new frames than the window) still gets a page, freed at once.
//
// Non-keyframes (store = false): the step's riders take temporary pages from
// the free list and its stream tokens are appended to the special stream
// (upstream: "append with eviction deferred"); visible = stored pages + the
// temporary pages + the special stream. end_step() rolls back: every page the
// step took is released in reverse order and the pool shrinks back, which
// restores the free stack, the pool size and the stream length exactly. The
// stream slots past the restored length were written but are not part of the
// cache (no table ever shows them; the next append overwrites them).
#pragma once

#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/window_policy.h"

#include <deque>
#include <vector>

namespace lingbot::kv {

// Which rows of a frame ride in its page (see the comment above).
enum class PageRouting {
  // Tokens go to the special stream as soon as they are known to stay
  // visible: upstream's layout with default flags (page = the patches).
  Upstream,
  // Every token rides in its frame's page; retained specials are copied to
  // the stream when their frame is evicted. The dense layout in page form:
  // one page per listed frame (used by the device store's Dense layout).
  WholeFrames,
};

class PagePlanner {
 public:
  static constexpr int32_t kStreamOnlyPageSize = 256;

  struct FramePage {
    int64_t frame;  // stored-frame serial (as in WindowPolicy)
    int32_t page;
  };

  PagePlanner(const CacheConfig& config, const TokenLayout& layout, PageRouting routing = PageRouting::Upstream);

  // Plans a step and updates the bookkeeping (for store = true the step's
  // evictions are done here). The plan stays valid until end_step().
  const StepPlan& begin_step(int num_frames, bool store);
  void end_step();
  void reset();  // empty, every page id dropped
  bool in_step() const { return in_step_; }
  const StepPlan& plan() const { return plan_; }

  // The stored cache's page table (outside a step, or the state a step started from
  // once it has ended).
  PageTable stored_table() const;

  int32_t page_size() const { return page_size_; }
  int stream_tokens_per_frame() const { return stream_per_frame_; }
  int rider_tokens_per_frame() const { return riders_per_frame_; }
  bool copies_on_eviction() const { return copies_on_eviction_; }

  const WindowPolicy& window() const { return window_; }
  const PagePool& pool() const { return pool_; }
  const std::deque<FramePage>& frame_pages() const { return frame_pages_; }  // list order
  const std::vector<int32_t>& special_pages() const { return special_pages_; }
  int64_t special_tokens() const { return special_tokens_; }
  // Writes the page figures of `stats` (page size, pool, pages in use and
  // free, frame and special pages, special stream tokens).
  void report(CacheStats& stats) const;

  // Throws lingbot::Error if the bookkeeping is inconsistent: every page id is
  // exactly one of {frame page, special page, temporary page, free}; frame
  // pages mirror the window's frame list; the stream's page count matches its
  // length. Tests call it after every step.
  void check_invariants() const;

 private:
  // Appends `count` tokens to the special stream, calling emit(page, slot, n)
  // for each run of slots (a run ends at a page boundary).
  template <typename Emit>
  void append_to_stream(int32_t count, Emit&& emit);
  int32_t take_page();
  void build_visible(PageTable& table) const;

  CacheConfig config_;
  TokenLayout layout_;
  WindowPolicy window_;
  PagePool pool_;
  int32_t page_size_ = 0;
  int stream_per_frame_ = 0;
  int riders_per_frame_ = 0;
  bool copies_on_eviction_ = false;

  std::deque<FramePage> frame_pages_;   // mirrors window_.frames() when riders_per_frame_ > 0
  std::vector<int32_t> special_pages_;  // stream order
  int64_t special_tokens_ = 0;

  // The open step.
  bool in_step_ = false;
  StepPlan plan_;
  std::vector<int32_t> temp_pages_;        // non-keyframe riders
  std::vector<int32_t> step_allocations_;  // every page taken this step, in order
  int32_t saved_pool_pages_ = 0;
  int64_t saved_special_tokens_ = 0;
  size_t saved_special_pages_ = 0;
};

}  // namespace lingbot::kv
