// The dense layout (upstream's SDPA cache) as page plans, so that one device
// executor and one attention kernel serve both layouts on the GPU.
//
// Semantics come from WindowPolicy (which frames are listed, which are
// evicted, which specials are retained); this class only decides where the
// tokens live, in pages of the same geometry as the paged layout
// (kv/page_table.h PageGeometry), with ids from a PagePool:
//
//   evicting caches (tokens_per_frame > 1), page size = tokens_per_frame:
//     frame pages:     one page per listed frame holding the WHOLE frame
//                      (the dense layout's frame slot), slots 0.. in row order;
//     retained stream: the specials of evicted frames, copied out of their
//                      frame page when the frame is evicted (SlotCopy), packed
//                      densely, append-only (the dense layout's retained list).
//   non-evicting caches (1-token frames: the camera head), page size
//     kStreamPageTokens: every stored frame is appended to the stream, so a
//     long stream of one-token frames is a few large pages, not one page per
//     frame. Nothing is ever evicted, so "frames in order" is the stream.
//
// Visible order: frame pages in list order, a non-keyframe's own frame pages,
// then the stream pages, so only the last page can be partial. The key order
// differs from the CPU dense store (retained first); attention is a softmax
// over a set, so only rounding differs.
//
// The step protocol is kv::PagePlanner's (kv/page_planner.h): every page a
// step needs is allocated before any page is released; a non-keyframe's
// pages are temporary and end_step() rolls them back in reverse order, which
// restores the pool, its free stack and the stream exactly.
#pragma once

#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/window_policy.h"

#include <deque>
#include <vector>

namespace lingbot::kv {

class DensePagePlanner {
 public:
  static constexpr int32_t kStreamPageTokens = 256;

  struct FramePage {
    int64_t frame;  // stored-frame serial (as in WindowPolicy)
    int32_t page;
  };

  // pool_growth_pages: page ids the pool adds at a time (the store allocates
  // device memory in chunks of that many pages).
  DensePagePlanner(const CacheConfig& config, const TokenLayout& layout, int32_t pool_growth_pages);

  const StepPlan& begin_step(int num_frames, bool store);
  void end_step();
  void reset();
  bool in_step() const { return in_step_; }
  const StepPlan& plan() const { return plan_; }
  PageTable stored_table() const;  // outside a step

  int32_t page_size() const { return page_size_; }
  bool frame_pages_mode() const { return window_.evicts(); }
  const WindowPolicy& window() const { return window_; }
  const PagePool& pool() const { return pool_; }
  const std::deque<FramePage>& frame_pages() const { return frame_pages_; }
  const std::vector<int32_t>& stream_pages() const { return stream_pages_; }
  int64_t stream_tokens() const { return stream_tokens_; }

  // Throws lingbot::Error if the bookkeeping is inconsistent (tests).
  void check_invariants() const;

 private:
  template <typename Emit>
  void append_to_stream(int32_t count, Emit&& emit);
  int32_t take_page();
  void build_visible(PageTable& table) const;

  CacheConfig config_;
  TokenLayout layout_;
  WindowPolicy window_;
  PagePool pool_;
  int32_t page_size_ = 0;

  std::deque<FramePage> frame_pages_;  // mirrors window_.frames() in frame-pages mode
  std::vector<int32_t> stream_pages_;
  int64_t stream_tokens_ = 0;

  bool in_step_ = false;
  StepPlan plan_;
  std::vector<int32_t> temp_pages_;
  std::vector<int32_t> step_allocations_;
  int32_t saved_pool_pages_ = 0;
  int64_t saved_stream_tokens_ = 0;
  size_t saved_stream_pages_ = 0;
};

}  // namespace lingbot::kv
