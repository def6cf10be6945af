// The call protocol of a KvCache step, checked the same way by every store:
//   begin_step -> (append(block) then attend(block)*) for each block -> end_step
// Misuse (a second begin, append twice for a block, attend before append,
// end before every block appended, ...) is a lingbot::Error, never UB. The
// checks run before the store touches anything, so a refused call changes
// nothing.
#pragma once

#include "core/tensor.h"
#include "kv/kv_cache.h"

#include <string_view>
#include <vector>

namespace lingbot::kv {

class StepTracker {
 public:
  explicit StepTracker(int num_blocks);

  void check_begin(int num_frames) const;      // not in a step, num_frames >= 1
  void begin(int num_frames, bool store);       // checks, then opens the step
  void check_append(int block) const;           // in a step, block valid, not yet appended
  void mark_appended(int block);
  void check_attend(int block) const;           // in a step, block appended
  void check_end() const;                       // in a step, every block appended
  void end();
  void reset();

  bool in_step() const { return in_step_; }
  int num_frames() const { return num_frames_; }
  bool store() const { return store_; }
  bool appended(int block) const { return appended_[static_cast<size_t>(block)] != 0; }
  int num_blocks() const { return static_cast<int>(appended_.size()); }
  int64_t frames_seen() const { return frames_seen_; }

 private:
  void check_block(int block, std::string_view call) const;

  std::vector<uint8_t> appended_;
  bool in_step_ = false;
  int num_frames_ = 0;
  bool store_ = false;
  int64_t frames_seen_ = 0;
};

// Throws unless `t` is a float32 CPU tensor of shape [rows, num_heads, head_dim]
// (float32 or bfloat16 with or_bf16: what the CPU stores' append() takes).
void check_token_tensor(const Tensor& t, int64_t rows, const TokenLayout& layout, std::string_view what,
                        bool or_bf16 = false);

}  // namespace lingbot::kv
