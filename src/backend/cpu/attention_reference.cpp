// The naive twin of attention(): every score in double, a plain two-pass
// softmax, single-threaded. Slow and obviously right; tests compare against it.
#include "backend/cpu/attention.h"

#include "core/half.h"
#include "kv/fp8_e4m3.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lingbot::cpu {

namespace {
// Value c of head h of token t of a span's keys (is_v false) or values, read
// back from its stored form.
double stored_value(const KvSpan& s, bool is_v, int64_t t, int num_heads, int head_dim, int h, int c) {
  const int64_t at = (t * num_heads + h) * head_dim + c;
  const void* base = is_v ? s.v : s.k;
  switch (s.element) {
    case KvElement::F32: return static_cast<const float*>(base)[at];
    case KvElement::Bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[at]);
    case KvElement::Fp8: {
      const float scale = (is_v ? s.v_scale : s.k_scale)[t * num_heads + h];
      return static_cast<double>(kv::e4m3_to_f32(static_cast<const uint8_t*>(base)[at]) * scale);
    }
  }
  return 0;
}
}  // namespace

void attention_reference(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads,
                         int head_dim, float scale, float* out) {
  detail::check_arguments(q, nq, kv, num_heads, head_dim, out);
  const int64_t row = int64_t{num_heads} * head_dim;
  const int64_t nk = detail::total_keys(kv);
  std::vector<double> scores(static_cast<size_t>(nk));
  std::vector<double> acc(static_cast<size_t>(head_dim));
  for (int64_t i = 0; i < nq; ++i) {
    for (int h = 0; h < num_heads; ++h) {
      const float* qi = q + i * row + int64_t{h} * head_dim;
      float* oi = out + i * row + int64_t{h} * head_dim;
      if (nk == 0) {
        std::fill(oi, oi + head_dim, 0.f);
        continue;
      }
      // Scores of every key, in span order.
      double max_score = -INFINITY;
      int64_t j = 0;
      for (const KvSpan& s : kv) {
        for (int64_t t = 0; t < s.tokens; ++t, ++j) {
          double d = 0;
          for (int c = 0; c < head_dim; ++c) d += qi[c] * stored_value(s, false, t, num_heads, head_dim, h, c);
          scores[static_cast<size_t>(j)] = d * scale;
          max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
        }
      }
      // Softmax-weighted sum of the values.
      double denom = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      j = 0;
      for (const KvSpan& s : kv) {
        for (int64_t t = 0; t < s.tokens; ++t, ++j) {
          const double w = std::exp(scores[static_cast<size_t>(j)] - max_score);
          denom += w;
          for (int c = 0; c < head_dim; ++c)
            acc[static_cast<size_t>(c)] += w * stored_value(s, true, t, num_heads, head_dim, h, c);
        }
      }
      for (int c = 0; c < head_dim; ++c) oi[c] = static_cast<float>(acc[static_cast<size_t>(c)] / denom);
    }
  }
}

}  // namespace lingbot::cpu
