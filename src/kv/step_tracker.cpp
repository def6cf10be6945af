#include "kv/step_tracker.h"

#include <algorithm>

namespace lingbot::kv {

StepTracker::StepTracker(int num_blocks) {
  LB_CHECK(num_blocks >= 1, "kv cache: num_blocks must be >= 1, got {}", num_blocks);
  appended_.assign(static_cast<size_t>(num_blocks), 0);
}

void StepTracker::check_block(int block, std::string_view call) const {
  LB_CHECK(block >= 0 && block < num_blocks(), "kv cache: {}: block {} out of range [0, {})", call, block,
           num_blocks());
}

void StepTracker::check_begin(int num_frames) const {
  LB_CHECK(!in_step_, "kv cache: begin_step while the previous step is still open (call end_step)");
  LB_CHECK(num_frames >= 1, "kv cache: begin_step: num_frames must be >= 1, got {}", num_frames);
}

void StepTracker::begin(int num_frames, bool store) {
  check_begin(num_frames);
  std::fill(appended_.begin(), appended_.end(), uint8_t{0});
  in_step_ = true;
  num_frames_ = num_frames;
  store_ = store;
  frames_seen_ += num_frames;
}

void StepTracker::check_append(int block) const {
  LB_CHECK(in_step_, "kv cache: append(block {}) outside a step (call begin_step first)", block);
  check_block(block, "append");
  LB_CHECK(!appended(block), "kv cache: append(block {}) called twice in one step", block);
}

void StepTracker::mark_appended(int block) { appended_[static_cast<size_t>(block)] = 1; }

void StepTracker::check_attend(int block) const {
  LB_CHECK(in_step_, "kv cache: attend(block {}) outside a step", block);
  check_block(block, "attend");
  LB_CHECK(appended(block), "kv cache: attend(block {}) before append(block {}) in this step", block, block);
}

void StepTracker::check_end() const {
  LB_CHECK(in_step_, "kv cache: end_step without begin_step");
  for (int b = 0; b < num_blocks(); ++b) {
    LB_CHECK(appended(b), "kv cache: end_step: block {} was not appended in this step", b);
  }
}

void StepTracker::end() { in_step_ = false; }

void StepTracker::reset() {
  std::fill(appended_.begin(), appended_.end(), uint8_t{0});
  in_step_ = false;
  num_frames_ = 0;
  store_ = false;
  frames_seen_ = 0;
}

void check_token_tensor(const Tensor& t, int64_t rows, const TokenLayout& layout, std::string_view what,
                        bool or_bf16) {
  LB_CHECK(t.defined(), "kv cache: {} is an undefined tensor", what);
  LB_CHECK(t.device() == Device::CPU, "kv cache: {} must be on the cpu, got {}", what, t.describe());
  if (or_bf16) {
    LB_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, "kv cache: {} must be float32 or bfloat16, got {}",
             what, t.describe());
  } else {
    LB_CHECK(t.dtype() == DType::F32, "kv cache: {} must be float32, got {}", what, t.describe());
  }
  LB_CHECK(t.ndim() == 3 && t.dim(0) == rows && t.dim(1) == layout.num_heads && t.dim(2) == layout.head_dim,
           "kv cache: {} must be [{}, {}, {}], got {}", what, rows, layout.num_heads, layout.head_dim,
           t.describe());
}

}  // namespace lingbot::kv
