// Key ranges for the CPU attention kernels (attention_splits.h): when keys
// are cut, how the ranges partition them, and the merge of the ranges' rows
// against a softmax computed in double over all keys.
#include "backend/cpu/attention_splits.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;

// Keys are cut only where (512-query tile, head) pairs are fewer than 128
// and keys plentiful: a frame against a long window, not the frame blocks,
// the encoder or the scale phase.
TEST(KeyRanges, CutWhereWorkItemsAreFew) {
  EXPECT_EQ(key_splits_for(978, 70416, 16), 4);  // a frame, the full window: 32 pairs
  EXPECT_EQ(key_splits_for(978, 10758, 16), 2);  // frame 10: ranges of at least 4,096 keys
  EXPECT_EQ(key_splits_for(978, 6000, 16), 1);
  EXPECT_EQ(key_splits_for(978, 978, 16), 1);    // a frame block
  EXPECT_EQ(key_splits_for(7824, 7824, 16), 1);  // the scale phase: 256 pairs
  EXPECT_EQ(key_splits_for(100, 100000, 1), 4);  // at most 4
  EXPECT_EQ(key_splits_for(0, 100000, 1), 1);
}

// Consecutive, none empty, each a whole number of key blocks but the last,
// together every key once.
TEST(KeyRanges, PartitionTheKeysAtBlocks) {
  for (int64_t keys : {1, 63, 64, 65, 1000, 4096, 70416}) {
    for (int asked : {0, 1, 2, 3, 4}) {
      const KeyRanges r = KeyRanges::make(978, keys, 16, 64, asked);
      ASSERT_GE(r.count, 1);
      ASSERT_LE(r.count, asked > 0 ? asked : kMaxKeySplits);
      EXPECT_EQ(r.keys_per_range % 64, 0);
      int64_t next = 0;
      for (int s = 0; s < r.count; ++s) {
        EXPECT_EQ(r.first(s), next) << keys << " keys, " << asked << " asked, range " << s;
        EXPECT_GT(r.keys(s), 0) << keys << " keys, " << asked << " asked, range " << s;
        next += r.keys(s);
      }
      EXPECT_EQ(next, keys) << keys << " keys, " << asked << " asked";
      if (asked > 0 && (keys + 63) / 64 >= asked) {
        EXPECT_EQ(r.count, asked) << keys << " keys";
      }
    }
  }
  EXPECT_EQ(KeyRanges::make(978, 70416, 16, 64).count, 4);
  EXPECT_THROW(KeyRanges::make(978, 1000, 16, 64, 5), Error);
  EXPECT_THROW(KeyRanges::make(978, 1000, 16, 64, -1), Error);
}

// Each range's rows normalised by its own sums, with its log-sum-exp, merge
// into the softmax over all keys (computed here in double, in one pass).
TEST(KeyRanges, MergeIntoTheSoftmaxOverAllKeys) {
  std::mt19937 rng(4);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t nq = 3;
  const int heads = 2, dim = 5, keys = 37;
  const int cuts[] = {0, 9, 10, 30, keys};  // four ranges, one of a single key
  const int count = 4;
  // scores in the exp2 domain (large, so that the ranges' maxima differ) and values
  std::vector<double> score(static_cast<size_t>(nq * heads * keys)), value(static_cast<size_t>(keys * heads * dim));
  for (double& x : score) x = 20 * normal(rng);
  for (double& x : value) x = normal(rng);
  const KeyRangeRows rows = KeyRangeRows::of_this_thread(count, nq, heads, dim);
  std::vector<double> want(static_cast<size_t>(nq * heads * dim));
  for (int64_t i = 0; i < nq; ++i) {
    for (int h = 0; h < heads; ++h) {
      const double* s = score.data() + (i * heads + h) * keys;
      auto vee = [&](int j, int d) { return value[static_cast<size_t>((j * heads + h) * dim + d)]; };
      double top = -INFINITY;
      for (int j = 0; j < keys; ++j) top = std::max(top, s[j]);
      double total = 0;
      for (int j = 0; j < keys; ++j) total += std::exp2(s[j] - top);
      for (int d = 0; d < dim; ++d) {
        double sum = 0;
        for (int j = 0; j < keys; ++j) sum += std::exp2(s[j] - top) * vee(j, d);
        want[static_cast<size_t>((i * heads + h) * dim + d)] = sum / total;
      }
      for (int r = 0; r < count; ++r) {  // the range's own softmax, as a kernel's item gives it
        double m = -INFINITY;
        for (int j = cuts[r]; j < cuts[r + 1]; ++j) m = std::max(m, s[j]);
        double l = 0;
        for (int j = cuts[r]; j < cuts[r + 1]; ++j) l += std::exp2(s[j] - m);
        rows.lse_of(r)[i * heads + h] = static_cast<float>(m + std::log2(l));
        for (int d = 0; d < dim; ++d) {
          double sum = 0;
          for (int j = cuts[r]; j < cuts[r + 1]; ++j) sum += std::exp2(s[j] - m) * vee(j, d);
          rows.rows_of(r)[(i * heads + h) * dim + d] = static_cast<float>(sum / l);
        }
      }
    }
  }
  std::vector<float> out(want.size(), -1.f);
  combine_key_ranges(rows, count, nq, heads, dim, out.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << i;
}
