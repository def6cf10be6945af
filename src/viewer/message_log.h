// Every message the viewer has sent, in order, shared by all pages: a page
// that opens late (or reconnects) reads it from the start, and each page
// reads at its own pace, so a slow page only falls behind itself.
// Appending never waits for a reader.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lingbot::viewer {

using Message = std::shared_ptr<const std::string>;

class MessageLog {
 public:
  void append(std::string message);
  // The messages from `first` on; waits up to `timeout` while there are none
  // (and the log is open). Empty after the timeout or once closed.
  std::vector<Message> read_from(size_t first, std::chrono::milliseconds timeout);
  std::vector<Message> snapshot() const;
  size_t size() const;
  // Wakes every waiting reader for good (the server is stopping).
  void close();
  bool closed() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable grew_;
  std::vector<Message> messages_;
  bool closed_ = false;
};

}  // namespace lingbot::viewer
