// Softmax attention on the GPU: within groups of tokens (encoder, frame
// blocks, the scale phase) and over the KV cache's pages (global blocks,
// camera head).
//
//   out[i, h, :] = sum_j softmax_j(q[i, h, :] . k[j, h, :] / sqrt(D)) v[j, h, :]
//
// over the keys j that query i sees: its own group's rows (attention_dense),
// or every visible key of one block of a KV cache (attention_paged). With no
// keys at all the output is zero (upstream returns zeros for an empty cache).
//
// Kernels (docs/attention-kernel.md describes their design):
//   Mma:   bf16, head_dim 64. FlashAttention-2 style: a CTA of 4 warps takes
//          128 queries of one head; K/V tiles of 64 keys stream through
//          shared memory (cp.async, two stages); QK^T and PV on the tensor
//          cores (mma.sync m16n8k16, fp32 accumulate, sm_80+); online softmax
//          in fp32 (exp2 domain). Keys may be split over several CTAs whose
//          partial results a combine kernel merges.
//   Warp:  any dtype (bf16, f32), head_dim <= 256: one warp per (query, head,
//          key split), lanes across head_dim, fp32 online softmax. The
//          generic fallback, and the camera head's kernel (few queries,
//          many keys: split over keys).
//   Naive: one thread per (query, head), two passes, fp64 accumulation,
//          head_dim <= 256. The obviously-right twin tests compare against.
//   WgmmaWs: sm_90a, warp-specialised (FlashAttention-3's structure): a
//          producer warpgroup streams 128-key tiles through an mbarrier
//          ring, two consumer warpgroups take turns on the tensor cores
//          (attention_wgmma_ws.cu).
//   Auto:  on Hopper WgmmaWs, elsewhere Mma, where they apply; else Warp.
//          `auto_choice` Mma or WgmmaWs pins what Auto picks on Hopper
//          (CudaBackendOptions::attention_kernel; Auto: WgmmaWs).
//
// Layouts (row-major, contiguous, on the device):
//   attention_dense: q, k, v, out [groups * n][num_heads * head_dim]; group g
//                    is rows [g*n, (g+1)*n) of each.
//   attention_paged: q, out [nq][num_heads][head_dim] (or [nq][H*D]); keys as
//                    the KvTableHeader (kv_table.h) lists them for `block`.
// q, k, v, out share one dtype (bf16 or f32); softmax scale 1/sqrt(head_dim).
//
// CUDA graphs: a launch's configuration depends only on the shapes of q and
// the chosen kernel, never on the number of visible keys, which the paged
// kernels read from the device table at run time (split boundaries too).
#pragma once

#include "backend/cuda/attention/attention_types.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/kv/kv_table.h"
#include "core/tensor.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lingbot::cuda {

const char* attention_kernel_name(AttentionKernel kernel);

// Self-attention within each of `groups` equal groups of rows (see above).
void attention_dense(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads, int head_dim,
                     Tensor& out, cudaStream_t stream, AttentionKernel auto_choice = AttentionKernel::Auto);
// The same with a chosen kernel (tests, benchmarks). Throws lingbot::Error if
// `kernel` cannot run these shapes (Mma: bf16 and head_dim 64 only;
// WgmmaWs: the same on sm_90 only).
void attention_dense_with(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v, int groups,
                          int num_heads, int head_dim, Tensor& out, cudaStream_t stream,
                          AttentionKernel auto_choice = AttentionKernel::Auto);

// q [nq, H, D] against every visible key of `block` of the cache whose
// device table is `table`; K/V stored in q's dtype. splits = 0 picks the
// split count from nq, num_heads and the GPU (attention_paged_splits);
// splits >= 1 forces it (tests). The Naive kernel never splits. Partial
// results of splits live in `scratch` (a DeviceScratch on `stream`: it grows
// at the first call that needs more, never during graph capture).
void attention_paged(const Tensor& q, const KvTableHeader* table, int block, int num_heads, int head_dim,
                     Tensor& out, DeviceScratch& scratch, cudaStream_t stream,
                     AttentionKernel kernel = AttentionKernel::Auto, int splits = 0,
                     AttentionKernel auto_choice = AttentionKernel::Auto);

// q [nq, H, D] (bfloat16) against every visible key of `block` of an fp8
// cache (kv/kv_fp8.h's pages: e4m3 codes and a scale per slot and head),
// with no read-back: the wgmma-ws kernel dequantises each key tile in
// shared memory, to the same bfloat16 values the read-back gives, so the
// result is the read-back path's bit for bit. `kernel` Auto or WgmmaWs, on
// the devices and shapes where fp8_attention_in_kernel() says so; else an
// error. Splits and scratch as attention_paged.
void attention_paged_fp8(const Tensor& q, const KvTableHeader* table, int block, int num_heads, int head_dim,
                         Tensor& out, DeviceScratch& scratch, cudaStream_t stream,
                         AttentionKernel kernel = AttentionKernel::Auto, int splits = 0,
                         AttentionKernel auto_choice = AttentionKernel::Auto);
// Whether `kernel` (Auto resolved with auto_choice) reads an fp8 cache
// directly: the wgmma-ws kernel on Hopper, head_dim 64. The others (mma.sync,
// warp, naive) read pages read back to bfloat16 staging first.
bool fp8_attention_in_kernel(AttentionKernel kernel, int head_dim, AttentionKernel auto_choice = AttentionKernel::Auto);

// The kernel Auto picks for a dtype and head_dim, and the key-split count
// attention_paged uses for nq queries of num_heads heads with that kernel on
// the current device.
AttentionKernel attention_auto_kernel(DType dtype, int head_dim, AttentionKernel auto_choice = AttentionKernel::Auto);
int attention_paged_splits(AttentionKernel kernel, int64_t nq, int num_heads);
// The most key splits attention_paged_splits picks for the warp kernel.
inline constexpr int kMaxWarpSplits = 32;

}  // namespace lingbot::cuda
