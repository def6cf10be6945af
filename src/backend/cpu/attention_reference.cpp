// The naive twin of attention(): every score in double, a plain two-pass
// softmax, single-threaded. Slow and obviously right; tests compare against it.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lingbot::cpu {

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
          const float* k = s.k + t * row + int64_t{h} * head_dim;
          double d = 0;
          for (int c = 0; c < head_dim; ++c) d += static_cast<double>(qi[c]) * k[c];
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
          const float* v = s.v + t * row + int64_t{h} * head_dim;
          for (int c = 0; c < head_dim; ++c) acc[static_cast<size_t>(c)] += w * v[c];
        }
      }
      for (int c = 0; c < head_dim; ++c) oi[c] = static_cast<float>(acc[static_cast<size_t>(c)] / denom);
    }
  }
}

}  // namespace lingbot::cpu
