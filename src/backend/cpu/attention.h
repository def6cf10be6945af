// Softmax attention on the CPU over keys/values held in several spans.
//
// The keys of one attend() are wherever the cache keeps them: a span per page
// (paged layout) or per frame / retained-token chunk (dense layout). The
// kernel reads the spans in place; there is no gather copy. Plain
// self-attention is one span holding the frame's own K/V.
//
// Shapes (row-major, contiguous):
//   q, out:       [nq][num_heads][head_dim]
//   span.k/.v:    [tokens][num_heads][head_dim]   (a row = num_heads*head_dim values)
//                 float32, or as the KV cache stores them: bfloat16, or fp8
//                 e4m3 with span.k_scale/v_scale [tokens][num_heads]
//                 (kv/fp8_e4m3.h); read back to float32 as they are loaded
//   out[i,h,:] = sum_j softmax_j(scale * q[i,h,:].k[j,h,:]) v[j,h,:]
// over the tokens of all spans (a set: span order does not matter beyond
// fp32 rounding). With no keys at all, out is zero (upstream's
// compute_attention returns zeros for an empty cache).
#pragma once

#include "backend/cpu/cpu_isa.h"

#include <cstdint>
#include <span>

namespace lingbot::cpu {

// The arithmetic of attention's two products: float32 (attention()), or
// bfloat16 operands with float32 sums (attention_bf16(), the bf16 mode on
// CPUs with AMX).
enum class AttentionProducts : uint8_t { F32, Bf16 };

// How a span's keys and values are stored.
enum class KvElement : uint8_t { F32, Bf16, Fp8 };

struct KvSpan {
  const void* k;  // [tokens][num_heads][head_dim] of `element`
  const void* v;  // [tokens][num_heads][head_dim] of `element`
  int64_t tokens;
  KvElement element = KvElement::F32;
  const float* k_scale = nullptr;  // Fp8 only: [tokens][num_heads], value = e4m3(code) * scale
  const float* v_scale = nullptr;
};

// Multithreaded (OpenMP over heads x query tiles; one thread for tiny calls),
// tiled, online softmax in fp32 (exp2 domain). q and out must not overlap.
// Results do not depend on the thread count.
void attention(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
               float scale, float* out);

// Same function, naive, single-threaded, accumulating in double: the
// obviously-right twin for tests.
void attention_reference(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads,
                         int head_dim, float scale, float* out);

namespace detail {
// The kernels behind attention(), selectable for tests and benchmarks.
//   TiledAvx2:   queries of one head as SIMD lanes, AVX2 + FMA (16 lanes)
//   TiledAvx512: the same algorithm built for AVX-512 (32 lanes)
//   Tiled:       the tiled kernel of the ISA in use (isa_in_use(); the AVX2
//                one where the AVX-512 one is missing, Rows where both are)
//   Rows:        one query row at a time, any head_dim, portable C++
//   Auto:        Tiled when nq >= 4, else Rows
enum class Kernel { Auto, Tiled, TiledAvx2, TiledAvx512, Rows };
// Throws lingbot::Error for a kernel this build or CPU cannot run
// (kernel_available() false). key_ranges (tiled kernels; tests and
// benchmarks): 0 cuts the keys as attention() does (attention_splits.h),
// n > 0 into n ranges (at most one per 64 keys, up to kMaxKeySplits).
void attention_with(Kernel kernel, const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads,
                    int head_dim, float scale, float* out, int key_ranges = 0);
bool kernel_available(Kernel kernel);
bool tiled_kernel_available();        // a tiled kernel for the ISA in use
Kernel tiled_kernel_for(Isa isa);     // TiledAvx512, TiledAvx2 or Rows
// Throws lingbot::Error for bad shapes, counts or null pointers.
void check_arguments(const float* q, int64_t nq, std::span<const KvSpan> kv, int num_heads, int head_dim,
                     const float* out);
int64_t total_keys(std::span<const KvSpan> kv);
}  // namespace detail

}  // namespace lingbot::cpu
