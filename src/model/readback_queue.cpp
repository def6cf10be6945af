#include "model/readback_queue.h"

#include "core/error.h"

#include <algorithm>
#include <utility>

namespace lingbot {

Tensor& ReadbackQueue::host_view(Tensor& memory, Tensor& view, const Shape& shape) {
  const int64_t n = std::max<int64_t>(shape_numel(shape), 1);
  if (!memory.defined() || memory.numel() < n) memory = be_.alloc_host({n}, DType::F32);
  view = memory.slice(0, shape_numel(shape)).reshape(shape);
  return view;
}

void ReadbackQueue::enqueue(const StepInfo& info, const Tensor& poses, const Tensor* raw) {
  LB_ASSERT(steps_.size() < static_cast<size_t>(kSlots));
  InFlight step{.info = info, .dense = raw != nullptr, .slot = next_slot_, .done = nullptr};
  Slot& slot = slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % kSlots;
  be_.download_async(poses, host_view(slot.poses_memory, slot.poses, poses.shape()));
  if (raw) be_.download_async(*raw, host_view(slot.raw_memory, slot.raw, raw->shape()));
  step.done = be_.fence();
  steps_.push_back(std::move(step));
}

LandedStep ReadbackQueue::pop() {
  LB_ASSERT(!steps_.empty());
  InFlight step = std::move(steps_.front());
  steps_.pop_front();
  be_.wait(step.done);
  const Slot& slot = slots_[step.slot];
  return LandedStep{.info = step.info, .poses = &slot.poses, .raw = step.dense ? &slot.raw : nullptr};
}

void ReadbackQueue::wait_all() {
  for (const InFlight& step : steps_) be_.wait(step.done);
}

void ReadbackQueue::discard_all() {
  wait_all();
  steps_.clear();
  next_slot_ = 0;
}

}  // namespace lingbot
