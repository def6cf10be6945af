#include "kv/page_planner.h"

#include <algorithm>

namespace lingbot::kv {

PagePlanner::PagePlanner(const CacheConfig& config, const TokenLayout& layout, PageRouting routing)
    : config_(config), layout_(layout), window_(config, layout), pool_(config.pool_growth_pages) {
  const int tpf = layout.tokens_per_frame();
  const int retained = window_.retained_tokens_per_frame();
  if (!window_.evicts()) {
    stream_per_frame_ = tpf;  // nothing is ever evicted: every token is permanent
  } else if (config.include_scale_frames && routing == PageRouting::Upstream) {
    stream_per_frame_ = retained;
  } else {
    stream_per_frame_ = 0;
    copies_on_eviction_ = retained > 0;
  }
  riders_per_frame_ = tpf - stream_per_frame_;
  page_size_ = riders_per_frame_ > 0 ? riders_per_frame_ : kStreamOnlyPageSize;
}

int32_t PagePlanner::take_page() {
  const int32_t page = pool_.allocate();
  step_allocations_.push_back(page);
  return page;
}

template <typename Emit>
void PagePlanner::append_to_stream(int32_t count, Emit&& emit) {
  while (count > 0) {
    const auto slot = static_cast<int32_t>(special_tokens_ % page_size_);
    if (slot == 0) special_pages_.push_back(take_page());  // no page yet, or the tail is full
    const int32_t n = std::min(count, page_size_ - slot);
    emit(special_pages_.back(), slot, n);
    special_tokens_ += n;
    count -= n;
  }
}

const StepPlan& PagePlanner::begin_step(int num_frames, bool store) {
  LB_CHECK(!in_step_, "kv cache: begin_step while the previous step is still open");
  LB_CHECK(num_frames >= 1, "kv cache: a step has at least one frame, got {}", num_frames);

  plan_.num_frames = num_frames;
  plan_.store = store;
  plan_.writes.clear();
  plan_.copies.clear();
  temp_pages_.clear();
  step_allocations_.clear();
  saved_pool_pages_ = pool_.pool_pages();
  saved_special_tokens_ = special_tokens_;
  saved_special_pages_ = special_pages_.size();

  // 1. The window decides (store only); nothing is released yet.
  const std::vector<WindowPolicy::Eviction>* evictions = nullptr;
  if (store) evictions = &window_.store(num_frames);
  const int64_t first_new_frame = window_.frames_stored() - num_frames;  // meaningful if store

  // 2. Allocate and route every row of the step: the frame's page first, then
  //    its stream tokens (upstream's order: patch page, then specials).
  const int tpf = layout_.tokens_per_frame();
  for (int i = 0; i < num_frames; ++i) {
    const int64_t row0 = int64_t{i} * tpf;
    if (riders_per_frame_ > 0) {
      const int32_t page = take_page();
      plan_.writes.push_back({row0 + stream_per_frame_, page, 0, riders_per_frame_});
      if (store) {
        frame_pages_.push_back({first_new_frame + i, page});
      } else {
        temp_pages_.push_back(page);
      }
    }
    int64_t row = row0;
    append_to_stream(stream_per_frame_, [&](int32_t page, int32_t slot, int32_t n) {
      plan_.writes.push_back({row, page, slot, n});
      row += n;
    });
  }

  if (store) {
    // Frame pages mirror the window's list before its erase: the evicted frames
    // are the contiguous run of list positions the window removed.
    const size_t n_evicted = evictions->size();
    if (riders_per_frame_ > 0 && n_evicted > 0) {
      const size_t first_pos = config_.include_scale_frames ? static_cast<size_t>(config_.scale_frames) : 0;
      LB_ASSERT(first_pos + n_evicted <= frame_pages_.size());
      // 3. Retained specials of evicted frames: page -> stream copies (quirk mode).
      if (copies_on_eviction_) {
        const int32_t retained = window_.retained_tokens_per_frame();
        for (size_t e = 0; e < n_evicted; ++e) {
          const FramePage& fp = frame_pages_[first_pos + e];
          LB_ASSERT(fp.frame == (*evictions)[e].frame);
          if (!(*evictions)[e].retained) continue;
          int32_t src_slot = 0;  // the page holds the whole frame: slot = row in frame
          append_to_stream(retained, [&](int32_t page, int32_t slot, int32_t n) {
            plan_.copies.push_back({fp.page, src_slot, page, slot, n});
            src_slot += n;
          });
        }
      }
      // 4. Only now release the evicted frames' pages, oldest first.
      for (size_t e = 0; e < n_evicted; ++e) {
        const FramePage& fp = frame_pages_[first_pos + e];
        LB_ASSERT(fp.frame == (*evictions)[e].frame);
        pool_.release(fp.page);
      }
      frame_pages_.erase(frame_pages_.begin() + static_cast<std::ptrdiff_t>(first_pos),
                         frame_pages_.begin() + static_cast<std::ptrdiff_t>(first_pos + n_evicted));
    }
  }

  plan_.pool_pages = pool_.pool_pages();
  build_visible(plan_.visible);
  in_step_ = true;
  return plan_;
}

void PagePlanner::end_step() {
  LB_CHECK(in_step_, "kv cache: end_step without begin_step");
  if (!plan_.store) {
    // Roll back: release in reverse order of allocation, then drop grown ids.
    for (auto it = step_allocations_.rbegin(); it != step_allocations_.rend(); ++it) pool_.release(*it);
    pool_.shrink_to(saved_pool_pages_);
    special_pages_.resize(saved_special_pages_);
    special_tokens_ = saved_special_tokens_;
    temp_pages_.clear();
  }
  step_allocations_.clear();
  in_step_ = false;
}

void PagePlanner::reset() {
  window_.reset();
  pool_.reset();
  frame_pages_.clear();
  special_pages_.clear();
  special_pages_.shrink_to_fit();
  special_tokens_ = 0;
  in_step_ = false;
  plan_ = StepPlan{};
  temp_pages_.clear();
  step_allocations_.clear();
}

void PagePlanner::build_visible(PageTable& table) const {
  table.page_size = page_size_;
  table.page_ids.clear();
  for (const FramePage& fp : frame_pages_) table.page_ids.push_back(fp.page);
  table.page_ids.insert(table.page_ids.end(), temp_pages_.begin(), temp_pages_.end());
  table.page_ids.insert(table.page_ids.end(), special_pages_.begin(), special_pages_.end());
  if (table.page_ids.empty()) {
    table.last_page_len = 0;
  } else if (!special_pages_.empty()) {
    const auto tail = static_cast<int32_t>(special_tokens_ % page_size_);
    table.last_page_len = tail == 0 ? page_size_ : tail;
  } else {
    table.last_page_len = page_size_;  // a frame page: always full (page size = riders)
  }
}

PageTable PagePlanner::stored_table() const {
  LB_CHECK(!in_step_, "kv cache: the stored page table is asked for inside a step");
  PageTable table;
  build_visible(table);
  return table;
}

void PagePlanner::check_invariants() const {
  pool_.check_invariants();
  std::vector<uint8_t> owner(static_cast<size_t>(pool_.pool_pages()), 0);
  auto claim = [&](int32_t page, const char* what) {
    LB_CHECK(page >= 0 && page < pool_.pool_pages(), "page planner: {} page {} outside the pool", what, page);
    LB_CHECK(pool_.is_used(page), "page planner: {} page {} is on the free list", what, page);
    LB_CHECK(!owner[static_cast<size_t>(page)], "page planner: {} page {} is in two lists", what, page);
    owner[static_cast<size_t>(page)] = 1;
  };
  for (const FramePage& fp : frame_pages_) claim(fp.page, "frame");
  for (int32_t p : special_pages_) claim(p, "special");
  for (int32_t p : temp_pages_) claim(p, "temporary");
  const auto claimed = std::count(owner.begin(), owner.end(), uint8_t{1});
  LB_CHECK(claimed == pool_.used_pages(), "page planner: {} pages in use but {} in lists",
           pool_.used_pages(), claimed);

  if (riders_per_frame_ > 0) {
    const auto& frames = window_.frames();
    LB_CHECK(frames.size() == frame_pages_.size(), "page planner: {} frame pages for {} listed frames",
             frame_pages_.size(), frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
      LB_CHECK(frames[i] == frame_pages_[i].frame, "page planner: frame page {} is frame {}, list says {}",
               i, frame_pages_[i].frame, frames[i]);
    }
  } else {
    LB_CHECK(frame_pages_.empty(), "page planner: frame pages without riders");
  }
  const int64_t want_special_pages = (special_tokens_ + page_size_ - 1) / page_size_;
  LB_CHECK(static_cast<int64_t>(special_pages_.size()) == want_special_pages,
           "page planner: {} special pages for {} stream tokens of page size {}", special_pages_.size(),
           special_tokens_, page_size_);
}

void PagePlanner::report(CacheStats& s) const {
  s.page_size = page_size_;
  s.pages_pool = pool_.pool_pages();
  s.pages_in_use = pool_.used_pages();
  s.pages_free = pool_.free_pages();
  s.frame_pages = static_cast<int64_t>(frame_pages_.size());
  s.special_pages = static_cast<int64_t>(special_pages_.size());
  s.special_stream_tokens = special_tokens_;
}

}  // namespace lingbot::kv
