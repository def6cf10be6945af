#include "backend/cpu/attention_splits.h"

#include "core/error.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace lingbot::cpu {

int key_splits_for(int64_t nq, int64_t num_keys, int num_heads) {
  const int64_t pairs = (nq + kSplitReferenceQueryTile - 1) / kSplitReferenceQueryTile * num_heads;
  if (pairs == 0 || pairs >= kSplitMinWorkItems) return 1;
  const int64_t wanted = (kSplitMinWorkItems + pairs - 1) / pairs;
  const int64_t affordable = num_keys / kMinSplitKeys;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({wanted, affordable, kMaxKeySplits})));
}

KeyRanges KeyRanges::make(int64_t nq, int64_t num_keys, int num_heads, int key_block, int asked) {
  LB_CHECK(asked >= 0 && asked <= kMaxKeySplits, "attention: {} key ranges asked for, not 0 to {}", asked,
           kMaxKeySplits);
  const int64_t blocks = (num_keys + key_block - 1) / key_block;
  const int64_t wanted = std::min<int64_t>(asked > 0 ? asked : key_splits_for(nq, num_keys, num_heads), blocks);
  KeyRanges r;
  r.keys_per_range = (blocks + wanted - 1) / wanted * key_block;
  r.num_keys = num_keys;
  r.count = static_cast<int>((num_keys + r.keys_per_range - 1) / r.keys_per_range);  // none empty
  return r;
}

int64_t KeyRanges::keys(int s) const {
  return std::min(keys_per_range, num_keys - first(s));
}

KeyRangeRows KeyRangeRows::of_this_thread(int count, int64_t nq, int num_heads, int head_dim) {
  thread_local std::vector<float> rows, lse;
  KeyRangeRows r;
  r.rows_stride = nq * num_heads * head_dim;
  r.lse_stride = nq * num_heads;
  rows.resize(static_cast<size_t>(count * r.rows_stride));
  lse.resize(static_cast<size_t>(count * r.lse_stride));
  r.rows = rows.data();
  r.lse = lse.data();
  return r;
}

void combine_key_ranges(const KeyRangeRows& ranges, int count, int64_t nq, int num_heads, int head_dim, float* out) {
  const int64_t row = int64_t{num_heads} * head_dim;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nq; ++i) {
    for (int h = 0; h < num_heads; ++h) {
      float lse[kMaxKeySplits];
      float top = -std::numeric_limits<float>::infinity();
      for (int s = 0; s < count; ++s) {
        lse[s] = ranges.lse_of(s)[i * num_heads + h];
        top = std::max(top, lse[s]);
      }
      float weight[kMaxKeySplits];
      float total = 0.f;
      for (int s = 0; s < count; ++s) {
        weight[s] = std::exp2(lse[s] - top);  // every range has keys: lse is finite
        total += weight[s];
      }
      const int64_t at = i * row + int64_t{h} * head_dim;
      for (int d = 0; d < head_dim; ++d) {
        float sum = 0.f;
        for (int s = 0; s < count; ++s) sum += weight[s] * ranges.rows_of(s)[at + d];
        out[at + d] = sum / total;
      }
    }
  }
}

}  // namespace lingbot::cpu
