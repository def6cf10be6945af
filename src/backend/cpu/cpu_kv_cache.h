// The CPU KV stores (dense and paged) behind one factory, with the choice of
// attention's arithmetic that kv::make_cpu_cache (kv/kv_cache.h, float32)
// does not offer: the bf16 mode's backend on AMX CPUs asks for bf16 products.
#pragma once

#include "backend/cpu/attention.h"
#include "kv/kv_cache.h"

#include <memory>

namespace lingbot::cpu {

// Throws lingbot::Error naming the bad field of config or layout_of_tokens.
std::unique_ptr<kv::KvCache> make_cpu_store(kv::Layout layout, const kv::CacheConfig& config,
                                            const kv::TokenLayout& layout_of_tokens, int num_blocks,
                                            AttentionProducts products);

}  // namespace lingbot::cpu
