// Attention with bfloat16 matrix products, for the bf16 mode (--cpu-dtype
// bf16) on CPUs whose bf16 products are fast (AMX, or AVX512-BF16 where it
// pays: bf16_products_choice.h).
//
// The same online softmax as attention() (FlashAttention's recurrence), but
// its two products per key block take bfloat16 operands with float32 sums:
//   S  = Q K^T              (bf16 x bf16 -> f32, exact products)
//   P  = 2^(S c - m)        (f32, then rounded to bf16 for the next product)
//   O  = O alpha + P V      (bf16 x bf16 -> f32, added into O)
// with c = scale * log2(e), m the running row maximum and alpha = 2^(m_old -
// m_new). The row sums l are kept in float32 from the unrounded P, and out =
// O / l. In the bf16 mode q, k and v are bfloat16 values already (the outputs
// of bf16 products), so the only rounding added against the float32 kernel is
// P's, as in FlashAttention's bf16 kernels and upstream's bf16 SDPA.
//
// Two kernels compute the products: on AMX tiles directly where the CPU has
// AMX (attention_amx.cpp), and through oneDNN matmul primitives elsewhere
// (each thread with its own primitives and stream: oneDNN runs a primitive
// single-threaded inside our parallel region). Both share the work items,
// (head, tile of up to 512 queries, range of keys), each on one thread,
// which stream their keys and values in blocks of 256 out of the spans (any
// stored element type; bf16 ones, the bf16 mode's KV store, copied as they
// are), zero-padded, their scores masked, and the AVX-512 softmax step.
#pragma once

#include "backend/cpu/attention.h"

#include <cstdint>
#include <span>

namespace lingbot::cpu {

// Whether attention_bf16() can run here: AVX-512 (its softmax pass) and
// oneDNN bf16 matmul primitives for its shapes. It is faster than
// attention() where oneDNN's bf16 products are (AMX, or AVX512-BF16 at an
// FMA's rate: bf16_products_choice.h), which is where the backend uses it;
// elsewhere it runs, slower, for tests.
bool bf16_attention_available();

// Below this many queries attention() is as fast (the products' tiles are 16 rows).
inline constexpr int64_t kMinBf16AttentionQueries = 16;

// As attention() (attention.h: shapes, spans, scale, empty key sets), q read
// as bfloat16 (rounded to nearest even if it is not bf16-valued).
void attention_bf16(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
                    float scale, float* out);

namespace detail {
// The AVX-512 passes (attention_bf16_avx512.cpp), plain loops over pointers.
//   rows x cols float32 -> bfloat16 bits, nearest even; dst row stride dst_ld.
void bf16_round_rows_avx512(const float* src, int64_t src_ld, int rows, int cols, uint16_t* dst, int64_t dst_ld);
//   One key block's softmax step for `rows` query rows: s [rows][ld] scores of
//   which the first n are keys (the rest padding), m / l running max and sum,
//   o [rows][head_dim] scaled by alpha in place, p [rows][ld] bf16 bits out
//   (0 beyond n).
void bf16_softmax_step_avx512(const float* s, int rows, int n, int ld, float c, float* m, float* l, float* o,
                              int head_dim, uint16_t* p);
//   The same with AVX512-BF16's conversion for P: only where the CPU has it
//   (cpu_has_bf16_arithmetic()); the same P for every value but subnormals.
void bf16_softmax_step_avx512bf16(const float* s, int rows, int n, int ld, float c, float* m, float* l, float* o,
                                  int head_dim, uint16_t* p);
bool bf16_attention_avx512_built();

// The kernels behind attention_bf16(), selectable for tests and benchmarks:
//   Onednn: the products through oneDNN matmul primitives (any CPU with
//           AVX-512 and oneDNN bf16 matmul);
//   Amx:    the products on AMX tiles directly (attention_amx.cpp; CPUs with
//           AMX-BF16 whose kernel grants the tiles, head_dim a multiple of 32
//           up to 256);
//   Auto:   Amx where it can run, else Onednn.
enum class Bf16Kernel { Auto, Onednn, Amx };
bool bf16_kernel_available(Bf16Kernel kernel, int head_dim);
// How the work is cut into items (both kernels). A work item is one head,
// one tile of queries and one range of keys; items are handed out to the
// threads as they free up, so many items let the threads that finish early
// take work from a slow one, while a tall query tile reads its head's keys
// fewer times.
//
// Query tiles: at most kBf16MaxQueryTile rows (a frame's 978 in two tiles),
// halved (down to kBf16MinQueryTile) while there are fewer than
// kBf16ItemsPerThread items per thread. A query's result does not depend on
// its tile, so this may follow the thread count. Keys: cut into ranges where
// pairs of tile and head are few (attention_splits.h).
inline constexpr int kBf16MaxQueryTile = 512;
inline constexpr int kBf16MinQueryTile = 128;
inline constexpr int kBf16ItemsPerThread = 8;
// The query tile's rows for `threads` threads (a multiple of `step`), with
// the keys cut into key_ranges ranges (attention_splits.h).
int bf16_query_tile(int64_t nq, int num_heads, int key_ranges, int threads, int step);
// Throws lingbot::Error for a kernel this build, CPU or head_dim cannot run.
// Tests and benchmarks may fix the cut: max_tile_rows > 0 bounds the query
// tiles (a multiple of 32 up to 512, then not shrunk for the threads);
// key_splits > 0 cuts the keys into that many ranges (at most one per key
// block, up to kMaxKeySplits). 0 chooses as above.
void attention_bf16_with(Bf16Kernel kernel, const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads,
                         int head_dim, float scale, float* out, int max_tile_rows = 0, int key_splits = 0);
// "AMX tiles" or "oneDNN matmul": what Auto runs for head_dim 64 here.
const char* bf16_attention_kernel_name();

// Keys per softmax step, both kernels.
inline constexpr int kBf16KeyBlock = 256;

// A work item's keys and where its rows go (both kernels): the keys
// [first_key, first_key + key_count) of its head, at least one; its rows
// normalised into out (rows of num_heads * head_dim floats, as the
// attention's output); with key ranges also each row's log-sum-exp,
// m + log2(l), into lse[i * num_heads + h] (attention_splits.h).
struct Bf16ItemTarget {
  int64_t first_key = 0;
  int64_t key_count = 0;
  float* out = nullptr;
  float* lse = nullptr;
};

// The AMX kernel's pieces (attention_amx.cpp), called by attention_bf16.cpp.
inline constexpr int kAmxRowStep = 32;  // its query tiles are padded to a multiple of this
// One thread's buffers (sizes for a query tile of T rows, head_dim D):
struct AmxScratch {
  uint16_t* q;     // [T][D]
  uint16_t* k;     // [kBf16KeyBlock][D], and v
  uint16_t* v;
  uint16_t* kp;    // [kBf16KeyBlock][D]: the keys packed as tiles, and vp the values
  uint16_t* vp;
  float* s;        // [2][32][kBf16KeyBlock] (row stride kBf16KeyBlock): two groups of rows
  uint16_t* p;     // [2][32][kBf16KeyBlock]
  float* o;        // [T][D]
  float* m;        // [T], and l
  float* l;
  float* row;      // [2 D]
};
bool amx_attention_built();
void amx_begin_tiles();  // each thread, before its first item: loads the tile configuration
void amx_end_tiles();    // and after its last
// One work item: head h, queries [i0, i0 + min(tile, nq - i0)), tile a
// multiple of kAmxRowStep, against the keys and into the target of `item`;
// c = scale * log2(e).
void amx_attention_item(const float* q, int64_t nq, const KvSpan* spans, size_t count, int num_heads, int head_dim,
                        float c, const Bf16ItemTarget& item, int h, int64_t i0, int tile, const AmxScratch& scratch);
}  // namespace detail

}  // namespace lingbot::cpu
