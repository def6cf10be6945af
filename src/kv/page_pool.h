// Page id accounting for one paged cache (shared by all its blocks).
//
// Ids are dense, 0 .. pool_pages()-1. The pool starts empty (lazy) and grows
// by `growth_pages` ids when a page is needed and none is free, so there is no
// fixed stream-length limit. Free ids form a stack: allocate() pops the lowest
// id that is free after growth, release() pushes; undoing a sequence of
// allocations by releasing in reverse order and shrink_to() the old size
// restores the exact previous state (used for non-keyframes).
#pragma once

#include <cstdint>
#include <vector>

namespace lingbot::kv {

class PagePool {
 public:
  explicit PagePool(int32_t growth_pages);

  int32_t allocate();
  void release(int32_t page);
  // Drops ids >= pool_pages (all of them must be free); the free stack keeps
  // the order of the remaining ids.
  void shrink_to(int32_t pool_pages);
  void reset();  // empty pool, no ids

  int32_t pool_pages() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t free_pages() const { return static_cast<int32_t>(free_.size()); }
  int32_t used_pages() const { return pool_pages() - free_pages(); }
  bool is_used(int32_t page) const;
  const std::vector<int32_t>& free_stack() const { return free_; }  // top = back
  int32_t growth_pages() const { return growth_; }

  // Throws if the free stack and the in-use flags disagree (tests, debugging).
  void check_invariants() const;

 private:
  int32_t growth_;
  std::vector<int32_t> free_;    // stack, top = back
  std::vector<uint8_t> in_use_;  // per id
};

}  // namespace lingbot::kv
