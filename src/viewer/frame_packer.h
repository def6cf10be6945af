// Frames turned into wire messages (frame_packet.h) on a thread of their
// own, so the model's thread only hands over references to a frame's
// tensors. The hand-over queue is bounded: when the packer falls behind,
// submit() drops the frame (and counts it) rather than making the model wait.
#pragma once

#include "viewer/frame_packet.h"
#include "viewer/message_log.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace lingbot::viewer {

class FramePacker {
 public:
  FramePacker(MessageLog& log, int stride, size_t queue_capacity = 16);
  ~FramePacker();  // packs what is queued, then stops
  FramePacker(const FramePacker&) = delete;
  FramePacker& operator=(const FramePacker&) = delete;

  // Never blocks; false when the queue was full and the frame was dropped.
  bool submit(FrameInput frame);
  // Waits for room instead (a saved result, where nothing else is waiting).
  void submit_waiting(FrameInput frame);
  // After the queued frames: the End message. Returns once it is in the log.
  void finish(int frames);
  int64_t dropped() const { return dropped_; }

 private:
  void pack_loop();

  MessageLog& log_;
  const int stride_;
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<FrameInput> queue_;
  bool stopping_ = false;
  bool busy_ = false;
  std::atomic<int64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace lingbot::viewer
