#include "model/workspace.h"

#include <fmt/format.h>

namespace lingbot {

Tensor& Workspace::get(const std::string& name, const Shape& shape, DType dtype) {
  const std::string key = fmt::format("{}|{}|{}", name, shape_str(shape), dtype_name(dtype));
  auto it = buffers_.find(key);
  if (it == buffers_.end()) it = buffers_.emplace(key, backend_.alloc(shape, dtype)).first;
  return it->second;
}

size_t Workspace::bytes() const {
  size_t total = 0;
  for (const auto& [key, t] : buffers_) total += t.nbytes();
  return total;
}

}  // namespace lingbot
