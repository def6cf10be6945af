// What the CPU KV stores share: running attention over the spans of visible
// keys with a KvCache's tensor checks, and copying those spans out.
#pragma once

#include "backend/cpu/attention.h"
#include "core/tensor.h"
#include "kv/kv_cache.h"

#include <span>
#include <utility>

namespace lingbot::cpu {

// Checks q/out ([nq, num_heads, head_dim] float32 CPU, same shape, distinct
// memory) and runs attention() with scale 1/sqrt(head_dim), or
// attention_bf16() for AttentionProducts::Bf16 (from 16 queries on: below
// that the float32 kernel is as fast).
void attend_spans(const kv::TokenLayout& layout, std::span<const KvSpan> spans, const Tensor& q, Tensor& out,
                  AttentionProducts products = AttentionProducts::F32);

// Copies the spans' keys and values, in order, into two [n, num_heads, head_dim]
// float32 tensors (read back from the spans' storage type).
std::pair<Tensor, Tensor> gather_spans(const kv::TokenLayout& layout, std::span<const KvSpan> spans);

}  // namespace lingbot::cpu
