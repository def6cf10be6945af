// The bf16 mode's way into the CPU KV stores, whose attention takes float32
// queries and gives float32 outputs.
//
// With --cpu-dtype bf16 a global block's q, k and v come out of its bf16
// matrix products in bfloat16. k and v go to the store as they are (the CPU
// stores take bfloat16 rows and hold exactly their values, kv_rows.h); this
// wrapper widens q to float32 (exactly: a bfloat16 is the top half of a
// float32) and rounds attend()'s output to bfloat16 on the way out, so the
// stores and their attention kernels run as in fp32 mode; float32 tensors
// pass straight through. With kv-dtype auto a bridge fed bfloat16 keys
// stores bfloat16 (half the bytes), so the stored keys and the attention
// over them are those of a float32 store fed the same values widened;
// attention runs with bf16 products where they are the faster
// (attention_bf16.h).
#pragma once

#include "kv/kv_cache.h"

#include <functional>
#include <memory>

namespace lingbot::cpu {

using StoreFactory = std::function<std::unique_ptr<kv::KvCache>(const kv::CacheConfig&)>;

// The bridge over make_store(config), or, with kv-dtype auto and bfloat16
// keys at the first append, over make_store(config with dtype bf16).
std::unique_ptr<kv::KvCache> widen_bf16_for(const kv::CacheConfig& config, StoreFactory make_store);

}  // namespace lingbot::cpu
