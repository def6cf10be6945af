// Results on their way from the device to the host.
//
// A step's raw outputs (pose encodings of every camera iteration, and the
// depth head's two channels) are copied into a host slot (page-locked on a
// GPU) while the next step's device work runs; the host post-processing
// reads them once the copy has landed. Slots are reused round-robin, so at
// most kSlots steps can be in flight, and the tensors of a landed step stay
// valid until kSlots - 1 further steps have been enqueued.
#pragma once

#include "backend/backend.h"
#include "core/tensor.h"

#include <cstdint>
#include <deque>
#include <memory>

namespace lingbot {

// What the host needs to know of a step to complete its results.
struct StepInfo {
  int frames = 0, height = 0, width = 0;
  bool store = true;  // keyframe(s)
  int64_t first_index = 0;
};

// A step whose copies have landed.
struct LandedStep {
  StepInfo info;
  const Tensor* poses = nullptr;  // [iterations, frames, 9] float32 host
  const Tensor* raw = nullptr;    // [frames, 2, H, W] float32 host, or null without dense outputs
};

class ReadbackQueue {
 public:
  static constexpr int kSlots = 2;

  explicit ReadbackQueue(Backend& backend) : be_(backend) {}

  // Enqueues the copies of a step's outputs (device tensors; raw may be null).
  void enqueue(const StepInfo& info, const Tensor& poses, const Tensor* raw);
  size_t in_flight() const { return steps_.size(); }
  // Waits for the oldest step's copies and hands it over (in_flight() > 0).
  LandedStep pop();
  // Waits for every copy and forgets the steps (a reset: the device must be
  // done with the slots before they are reused). The next step takes the
  // first slot again, so a stream's scale step finds the memory that the
  // previous stream's scale step grew.
  void discard_all();
  // Waits for every copy still in flight, keeping the steps.
  void wait_all();

 private:
  struct InFlight {
    StepInfo info;
    bool dense = false;
    int slot = 0;
    std::shared_ptr<void> done;  // fence after the copies
  };
  // A slot's host memory only grows: the scale step's several frames and
  // the streamed frames after it share it, instead of page-locking memory
  // anew at each change of size. poses and raw view the start of it.
  struct Slot {
    Tensor poses_memory, raw_memory;
    Tensor poses, raw;
  };
  Tensor& host_view(Tensor& memory, Tensor& view, const Shape& shape);

  Backend& be_;
  std::deque<InFlight> steps_;
  Slot slots_[kSlots];
  int next_slot_ = 0;
};

}  // namespace lingbot
