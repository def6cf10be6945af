// Activation buffers, allocated once and reused.
//
// Every intermediate tensor of a frame step has a name; the first request
// for a (name, shape, dtype) allocates it on the backend's device, later
// requests return the same memory. A step therefore allocates nothing after
// its first run at a given size, and pointers stay stable from one frame to
// the next (a requirement of CUDA graph replay). The scale phase (many
// frames) and the streaming phase (one frame) simply use different entries.
#pragma once

#include "backend/backend.h"

#include <map>
#include <string>
#include <string_view>

namespace lingbot {

class Workspace {
 public:
  explicit Workspace(Backend& backend) : backend_(backend) {}
  Tensor& get(const std::string& name, const Shape& shape, DType dtype);
  Tensor& get(const std::string& name, const Shape& shape) { return get(name, shape, backend_.compute_dtype()); }
  size_t bytes() const;
  void clear() { buffers_.clear(); }

  // Freeing what a finished phase needed: track_use() forgets which buffers
  // were requested; release_unused() then frees every buffer not requested
  // since. The caller makes sure the device no longer reads them (and that
  // no recorded graph refers to them).
  void track_use();
  void release_unused();
  // Frees every buffer whose name starts with `prefix` (a stage's buffers,
  // once they are dead); the same rules as for release_unused().
  void release(std::string_view prefix);

 private:
  struct Entry {
    Tensor tensor;
    bool used = true;
  };
  Backend& backend_;
  std::map<std::string, Entry> buffers_;
};

}  // namespace lingbot
