#include "viewer/message_log.h"

namespace lingbot::viewer {

void MessageLog::append(std::string message) {
  auto shared = std::make_shared<const std::string>(std::move(message));
  {
    std::lock_guard lock(mutex_);
    messages_.push_back(std::move(shared));
  }
  grew_.notify_all();
}

std::vector<Message> MessageLog::read_from(size_t first, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  grew_.wait_for(lock, timeout, [&] { return closed_ || messages_.size() > first; });
  if (closed_ || messages_.size() <= first) return {};
  return {messages_.begin() + static_cast<std::ptrdiff_t>(first), messages_.end()};
}

std::vector<Message> MessageLog::snapshot() const {
  std::lock_guard lock(mutex_);
  return messages_;
}

size_t MessageLog::size() const {
  std::lock_guard lock(mutex_);
  return messages_.size();
}

void MessageLog::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  grew_.notify_all();
}

bool MessageLog::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

}  // namespace lingbot::viewer
