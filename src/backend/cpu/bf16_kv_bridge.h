// The bf16 mode's way into the CPU KV stores, which hold float32 K/V.
//
// With --cpu-dtype bf16 a global block's q, k and v come out of its bf16
// matrix products in bfloat16. This wrapper widens them to float32 on the
// way in (exactly: a bfloat16 is the top half of a float32) and rounds
// attend()'s output to bfloat16 on the way out, so the stores and their
// attention kernels run as in fp32 mode; float32 tensors pass straight
// through. Attention therefore stays float32 in the bf16 mode (the one
// rounding is the matrix products', whose output is bf16 anyway), and the
// KV memory is the fp32 mode's.
#pragma once

#include "kv/kv_cache.h"

#include <memory>

namespace lingbot::cpu {

std::unique_ptr<kv::KvCache> widen_bf16_for(std::unique_ptr<kv::KvCache> store);

}  // namespace lingbot::cpu
