#include "model/workspace.h"

#include <fmt/format.h>

namespace lingbot {

Tensor& Workspace::get(const std::string& name, const Shape& shape, DType dtype) {
  const std::string key = fmt::format("{}|{}|{}", name, shape_str(shape), dtype_name(dtype));
  auto it = buffers_.find(key);
  if (it == buffers_.end()) it = buffers_.emplace(key, Entry{backend_.alloc(shape, dtype)}).first;
  it->second.used = true;
  return it->second.tensor;
}

size_t Workspace::bytes() const {
  size_t total = 0;
  for (const auto& [key, e] : buffers_) total += e.tensor.nbytes();
  return total;
}

void Workspace::track_use() {
  for (auto& [key, e] : buffers_) e.used = false;
}

void Workspace::release(std::string_view prefix) {
  std::erase_if(buffers_, [prefix](const auto& kv) { return kv.first.starts_with(prefix); });
}

void Workspace::release_unused() {
  std::erase_if(buffers_, [](const auto& kv) { return !kv.second.used; });
}

}  // namespace lingbot
