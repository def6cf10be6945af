#include "viewer/frame_packer.h"

#include "core/log.h"

namespace lingbot::viewer {

FramePacker::FramePacker(MessageLog& log, int stride, size_t queue_capacity)
    : log_(log), stride_(stride), capacity_(queue_capacity), thread_([this] { pack_loop(); }) {}

FramePacker::~FramePacker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

bool FramePacker::submit(FrameInput frame) {
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= capacity_) {
      ++dropped_;
      return false;
    }
    queue_.push_back(std::move(frame));
  }
  changed_.notify_all();
  return true;
}

void FramePacker::submit_waiting(FrameInput frame) {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return queue_.size() < capacity_; });
    queue_.push_back(std::move(frame));
  }
  changed_.notify_all();
}

void FramePacker::finish(int frames) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  log_.append(encode_end(frames));
}

void FramePacker::pack_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to pack
    FrameInput frame = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    changed_.notify_all();  // room for submit_waiting
    try {
      log_.append(encode_frame(frame, stride_));
    } catch (const std::exception& e) {  // a malformed frame costs the page that frame, not the run
      log_warn("viewer: frame {} not shown: {}", frame.index, e.what());
    }
    frame = FrameInput{};  // let go of the tensors outside the lock
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace lingbot::viewer
