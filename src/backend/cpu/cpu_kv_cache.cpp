// make_cpu_cache (declared in kv/kv_cache.h) and make_cpu_store
// (cpu_kv_cache.h): the CPU stores live in the CPU backend because they
// attend with cpu::attention.
#include "backend/cpu/cpu_kv_cache.h"

#include "backend/cpu/dense_kv_cache.h"
#include "backend/cpu/paged_kv_cache.h"

namespace lingbot::cpu {

std::unique_ptr<kv::KvCache> make_cpu_store(kv::Layout layout, const kv::CacheConfig& config,
                                            const kv::TokenLayout& layout_of_tokens, int num_blocks,
                                            AttentionProducts products) {
  kv::validate(config);
  kv::validate(layout_of_tokens);
  LB_CHECK(num_blocks >= 1, "kv cache: num_blocks must be >= 1, got {}", num_blocks);
  if (layout == kv::Layout::Dense) return std::make_unique<DenseKvCache>(config, layout_of_tokens, num_blocks, products);
  return std::make_unique<PagedKvCache>(config, layout_of_tokens, num_blocks, products);
}

}  // namespace lingbot::cpu

namespace lingbot::kv {

std::unique_ptr<KvCache> make_cpu_cache(Layout layout, const CacheConfig& config,
                                        const TokenLayout& layout_of_tokens, int num_blocks) {
  return cpu::make_cpu_store(layout, config, layout_of_tokens, num_blocks, cpu::AttentionProducts::F32);
}

}  // namespace lingbot::kv
