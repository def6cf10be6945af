// make_cpu_cache (declared in kv/kv_cache.h): the CPU stores live in the CPU
// backend because they attend with cpu::attention.
#include "backend/cpu/dense_kv_cache.h"
#include "backend/cpu/paged_kv_cache.h"
#include "kv/kv_cache.h"

namespace lingbot::kv {

std::unique_ptr<KvCache> make_cpu_cache(Layout layout, const CacheConfig& config,
                                        const TokenLayout& layout_of_tokens, int num_blocks) {
  validate(config);
  validate(layout_of_tokens);
  LB_CHECK(num_blocks >= 1, "kv cache: num_blocks must be >= 1, got {}", num_blocks);
  if (layout == Layout::Dense) return std::make_unique<cpu::DenseKvCache>(config, layout_of_tokens, num_blocks);
  return std::make_unique<cpu::PagedKvCache>(config, layout_of_tokens, num_blocks);
}

}  // namespace lingbot::kv
