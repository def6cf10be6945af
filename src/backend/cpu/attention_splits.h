// Key splits for the CPU attention kernels (the float32 tiled kernel and
// both bf16 kernels).
//
// A kernel's work item is one head, one tile of queries and one range of
// keys; items are handed out to the threads as they free up. With few
// (query tile, head) pairs, as one frame against a long KV window (two tiles
// of 978 queries x 16 heads = 32 pairs), each thread gets two items, and one
// slow thread (a VM's shared CPU, a hybrid CPU's efficiency core) holds the
// whole step back. Cutting each pair's keys into ranges gives more, shorter
// items. Each range's rows are normalised by its own sums, and its log-sum-
// exp says how much of the whole softmax the range holds:
//
//   lse_s = m_s + log2(l_s)   (m the range's maximum of the scaled scores,
//                              l its sum of 2^(score - m), in the exp2 domain)
//   out   = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M),  M = max_s lse_s
//
// The cut changes the order of the sums, so it depends on the shapes only,
// never on the thread count: neither do the results.
#pragma once

#include <cstdint>
#include <vector>

namespace lingbot::cpu {

// Keys are cut where (512-query tile, head) pairs are fewer than
// kSplitMinWorkItems, into up to kMaxKeySplits ranges of at least
// kMinSplitKeys keys.
inline constexpr int kSplitReferenceQueryTile = 512;
inline constexpr int kSplitMinWorkItems = 128;
inline constexpr int kMaxKeySplits = 4;
inline constexpr int64_t kMinSplitKeys = 4096;

// How many ranges the model's shapes get (1: none).
int key_splits_for(int64_t nq, int64_t num_keys, int num_heads);

// The ranges of one attention call's num_keys keys: `count` ranges of
// keys_per_range keys (a multiple of the kernel's key block), the last one
// shorter; none empty.
struct KeyRanges {
  int count = 1;
  int64_t keys_per_range = 0;
  int64_t num_keys = 0;

  // asked: the number of ranges wanted (0: key_splits_for's), at most one
  // per key block. num_keys > 0.
  static KeyRanges make(int64_t nq, int64_t num_keys, int num_heads, int key_block, int asked = 0);
  int64_t first(int s) const { return s * keys_per_range; }
  int64_t keys(int s) const;
};

// Where the ranges' rows wait to be merged: `count` arrays of output rows
// ([nq][num_heads * head_dim]) and of log-sum-exps ([nq][num_heads]); each
// calling thread keeps its own, grown as needed.
struct KeyRangeRows {
  float* rows = nullptr;
  float* lse = nullptr;
  int64_t rows_stride = 0;  // floats from one range's rows to the next's
  int64_t lse_stride = 0;

  static KeyRangeRows of_this_thread(int count, int64_t nq, int num_heads, int head_dim);
  float* rows_of(int s) const { return rows + s * rows_stride; }
  float* lse_of(int s) const { return lse + s * lse_stride; }
};

// The ranges' rows merged into out ([nq][num_heads * head_dim]), in parallel.
void combine_key_ranges(const KeyRangeRows& ranges, int count, int64_t nq, int num_heads, int head_dim, float* out);

}  // namespace lingbot::cpu
