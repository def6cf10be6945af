#include "kv/page_pool.h"

#include "core/error.h"

#include <algorithm>
#include <limits>

namespace lingbot::kv {

PagePool::PagePool(int32_t growth_pages) : growth_(growth_pages) {
  LB_CHECK(growth_pages >= 1, "kv cache: pool_growth_pages must be >= 1, got {}", growth_pages);
}

int32_t PagePool::allocate() {
  if (free_.empty()) {
    const int32_t old = pool_pages();
    LB_CHECK(old <= std::numeric_limits<int32_t>::max() - growth_,
             "kv cache: page pool cannot grow past {} pages (int32 page ids)", old);
    in_use_.resize(static_cast<size_t>(old) + static_cast<size_t>(growth_), 0);
    // Push the new ids highest first, so that they are handed out lowest first.
    for (int32_t id = old + growth_ - 1; id >= old; --id) free_.push_back(id);
  }
  const int32_t page = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(page)] = 1;
  return page;
}

void PagePool::release(int32_t page) {
  LB_ASSERT(page >= 0 && page < pool_pages() && in_use_[static_cast<size_t>(page)]);
  in_use_[static_cast<size_t>(page)] = 0;
  free_.push_back(page);
}

void PagePool::shrink_to(int32_t pool_pages_wanted) {
  LB_ASSERT(pool_pages_wanted >= 0 && pool_pages_wanted <= pool_pages());
  for (int32_t id = pool_pages_wanted; id < pool_pages(); ++id) {
    LB_ASSERT(!in_use_[static_cast<size_t>(id)]);
  }
  std::erase_if(free_, [&](int32_t id) { return id >= pool_pages_wanted; });
  in_use_.resize(static_cast<size_t>(pool_pages_wanted));
}

void PagePool::reset() {
  free_.clear();
  free_.shrink_to_fit();
  in_use_.clear();
  in_use_.shrink_to_fit();
}

bool PagePool::is_used(int32_t page) const {
  return page >= 0 && page < pool_pages() && in_use_[static_cast<size_t>(page)] != 0;
}

void PagePool::check_invariants() const {
  std::vector<uint8_t> seen(in_use_.size(), 0);
  for (int32_t id : free_) {
    LB_CHECK(id >= 0 && id < pool_pages(), "page pool: free id {} outside the pool of {}", id, pool_pages());
    LB_CHECK(!seen[static_cast<size_t>(id)], "page pool: id {} is on the free stack twice", id);
    LB_CHECK(!in_use_[static_cast<size_t>(id)], "page pool: id {} is both free and in use", id);
    seen[static_cast<size_t>(id)] = 1;
  }
  const auto used = std::count(in_use_.begin(), in_use_.end(), uint8_t{1});
  LB_CHECK(used + free_pages() == pool_pages(), "page pool: {} used + {} free != {} pages", used,
           free_pages(), pool_pages());
}

}  // namespace lingbot::kv
