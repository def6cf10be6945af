#include "backend/cpu/kv_spans.h"

#include "backend/cpu/attention_bf16.h"

#include "core/half.h"
#include "kv/fp8_e4m3.h"
#include "kv/step_tracker.h"

#include <cmath>
#include <cstring>

namespace lingbot::cpu {

void attend_spans(const kv::TokenLayout& layout, std::span<const KvSpan> spans, const Tensor& q, Tensor& out,
                  AttentionProducts products) {
  LB_CHECK(q.defined() && q.ndim() == 3, "kv cache: attend: q must be [nq, {}, {}], got {}", layout.num_heads,
           layout.head_dim, q.defined() ? q.describe() : std::string("an undefined tensor"));
  const int64_t nq = q.dim(0);
  kv::check_token_tensor(q, nq, layout, "attend: q");
  kv::check_token_tensor(out, nq, layout, "attend: out");
  const auto* q_begin = static_cast<const char*>(q.data());
  const auto* o_begin = static_cast<const char*>(out.data());
  LB_CHECK(nq == 0 || q_begin + q.nbytes() <= o_begin || o_begin + out.nbytes() <= q_begin,
           "kv cache: attend: out overlaps q");
  const float scale = 1.f / std::sqrt(static_cast<float>(layout.head_dim));
  if (products == AttentionProducts::Bf16 && nq >= kMinBf16AttentionQueries) {
    attention_bf16(q.f32(), nq, spans, layout.num_heads, layout.head_dim, scale, out.f32());
    return;
  }
  attention(q.f32(), nq, spans, layout.num_heads, layout.head_dim, scale, out.f32());
}

namespace {
// Rows [0, tokens) of a span's keys (is_v false) or values, read back to float32.
void read_rows(const KvSpan& s, bool is_v, const kv::TokenLayout& layout, float* dst) {
  const int64_t n = s.tokens * layout.row_floats();
  const void* src = is_v ? s.v : s.k;
  switch (s.element) {
    case KvElement::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvElement::Bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case KvElement::Fp8: {
      const float* scales = is_v ? s.v_scale : s.k_scale;
      for (int64_t i = 0; i < n; ++i)
        dst[i] = kv::e4m3_to_f32(static_cast<const uint8_t*>(src)[i]) * scales[i / layout.head_dim];
      return;
    }
  }
}
}  // namespace

std::pair<Tensor, Tensor> gather_spans(const kv::TokenLayout& layout, std::span<const KvSpan> spans) {
  const int64_t n = detail::total_keys(spans);
  Tensor k = Tensor::empty({n, layout.num_heads, layout.head_dim});
  Tensor v = Tensor::empty({n, layout.num_heads, layout.head_dim});
  const int64_t row = layout.row_floats();
  int64_t at = 0;
  for (const KvSpan& s : spans) {
    if (s.tokens == 0) continue;
    read_rows(s, false, layout, k.f32() + at * row);
    read_rows(s, true, layout, v.f32() + at * row);
    at += s.tokens;
  }
  return {std::move(k), std::move(v)};
}

}  // namespace lingbot::cpu
