// Which frames stay visible and which special tokens outlive their frame.
//
// The truth of the cache semantics: upstream's SDPA ("dictionary") cache,
// `SDPAAttention._apply_kv_cache_eviction`, as pure bookkeeping over frame
// ids (no K/V data). Both storage layouts ask this class what to evict.
//
// State: the frame list L (stored-frame serial numbers, oldest first) and the
// retained list R (frames whose first `retained_tokens_per_frame()` tokens,
// the specials, stay visible forever after the frame is evicted).
//
// store(F): L += the F new frames; then ONCE for the step:
//   if evicts() and |L| > W + S:
//     the frames L[S, |L| - W) are evicted; if cross_frame_special each of
//       them joins R, in eviction order;
//     L = L[0, S) + L[|L|-W, |L|)   if include_scale_frames
//     L = L[|L|-W, |L|)             otherwise: upstream's quirk, the first S
//       frames of the list are dropped WITHOUT retaining their specials, and
//       the next eviction waits until |L| exceeds W + S again.
// evicts() is false when a frame has a single token (upstream's
// `shape[3] > 1` check): such a cache keeps every stored frame. The camera
// head's caches (one camera token per frame) rely on this.
//
// Visible = tokens [0, retained_tokens_per_frame()) of every frame in R +
//           every token of every frame in L.
#pragma once

#include "kv/kv_cache.h"

#include <cstdint>
#include <deque>
#include <vector>

namespace lingbot::kv {

class WindowPolicy {
 public:
  struct Eviction {
    int64_t frame;  // stored-frame serial number
    bool retained;  // its specials join R (visible forever)
  };

  WindowPolicy(const CacheConfig& config, const TokenLayout& layout);

  // Stores `num_frames` new frames (serials frames_stored() ...), then evicts
  // once. Returns this step's evictions in list order (valid until the next call).
  const std::vector<Eviction>& store(int num_frames);
  void reset();

  const std::deque<int64_t>& frames() const { return frames_; }  // L, oldest first
  // Frames at the head of L that can never be evicted (the scale frames).
  int64_t pinned_frames() const;
  bool evicts() const { return evicts_; }
  int retained_tokens_per_frame() const { return retained_per_frame_; }
  int64_t retained_frames() const { return retained_frames_; }
  int64_t retained_tokens() const { return retained_frames_ * retained_per_frame_; }
  int64_t frames_stored() const { return next_frame_; }
  int64_t frames_evicted() const { return evicted_total_; }
  int64_t visible_tokens() const;
  // Writes the frame-list figures of `stats` (frames stored, listed, pinned,
  // in the window, evicted; retained and visible tokens), as every store
  // reports them.
  void report(CacheStats& stats) const;

 private:
  CacheConfig config_;
  int tokens_per_frame_ = 0;
  int retained_per_frame_ = 0;  // 0, 1 (camera_only) or num_special
  bool evicts_ = true;

  std::deque<int64_t> frames_;
  int64_t next_frame_ = 0;
  int64_t retained_frames_ = 0;
  int64_t evicted_total_ = 0;
  std::vector<Eviction> last_evictions_;
};

}  // namespace lingbot::kv
