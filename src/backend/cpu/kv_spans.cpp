#include "backend/cpu/kv_spans.h"

#include "kv/step_tracker.h"

#include <cmath>
#include <cstring>

namespace lingbot::cpu {

void attend_spans(const kv::TokenLayout& layout, std::span<const KvSpan> spans, const Tensor& q, Tensor& out) {
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
  attention(q.f32(), nq, spans, layout.num_heads, layout.head_dim, scale, out.f32());
}

std::pair<Tensor, Tensor> gather_spans(const kv::TokenLayout& layout, std::span<const KvSpan> spans) {
  const int64_t n = detail::total_keys(spans);
  Tensor k = Tensor::empty({n, layout.num_heads, layout.head_dim});
  Tensor v = Tensor::empty({n, layout.num_heads, layout.head_dim});
  const int64_t row = layout.row_floats();
  int64_t at = 0;
  for (const KvSpan& s : spans) {
    const size_t bytes = static_cast<size_t>(s.tokens * row) * sizeof(float);
    if (bytes == 0) continue;
    std::memcpy(k.f32() + at * row, s.k, bytes);
    std::memcpy(v.f32() + at * row, s.v, bytes);
    at += s.tokens;
  }
  return {std::move(k), std::move(v)};
}

}  // namespace lingbot::cpu
