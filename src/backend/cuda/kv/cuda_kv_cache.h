// The KV cache on the GPU: kv::KvCache (kv/kv_cache.h) with K/V in device
// memory, for the aggregator's global blocks (bf16) and the camera head (f32).
//
// Policy is reused, never re-derived:
//   Paged: kv::PagePlanner with upstream's routing (the two-stream
//          FlashInfer layout);
//   Dense: kv::PagePlanner with PageRouting::WholeFrames: kv::WindowPolicy's
//          frame list as whole-frame pages, retained specials copied to a
//          stream when their frame is evicted (the dictionary cache in pages).
// Both hand over a kv::StepPlan per step; this store executes it on the GPU
// exactly as the CPU paged store does on the host (writes, then copies; a
// non-keyframe's pages are rolled back by the planner at end_step), so every
// step leaves the same visible key set as the CPU stores.
//
// Memory. K/V are stored in the dtype of the tensors appended (bf16 or f32;
// fixed by the first append after construction or reset). Pages live in
// chunks allocated when the planner's pool grows, never moved or freed before
// reset(); a chunk holds its pages for every block (kv_table.h). Nothing is
// allocated for K/V before the first append.
//
// Per step, on two streams: `stream` (the home stream) for the table, and
// the kernel stream (by default the same; the CUDA backend's caches ask the
// backend for the stream its ops go to now, so a cache can serve a side
// branch, see Backend::begin_side_branch):
//   begin_step  host bookkeeping; grows the pool; uploads the step's table
//               (row moves, visible pages) from pinned memory, async, on
//               the home stream (before the kernels that read it: a side
//               branch forks from the home stream after the upload)
//   append      one scatter kernel (kv_append.h), on the kernel stream
//   attend      the attention kernel(s) (attention.h, attention_paged), ditto
//   end_step    host bookkeeping only
// append() and attend() launch with a configuration that depends only on the
// shapes of their arguments and read everything that changes per step from
// the table, whose device address is fixed: they can be captured once in a
// CUDA graph and replayed every step, with begin_step()/end_step() called
// outside the graph before and after each replay, and note_replayed_step()
// after a replay (the host did not call append for it). The first step after
// construction or reset() allocates and uploads inside append() (the dtype is
// known only then): run it outside capture.
//
// fp8 storage (config.dtype Fp8; bf16 appends and queries): pages of e4m3
// codes with a float32 scale per token and head (kv_fp8.h, the same format
// and rounding as the CPU stores, kv/fp8_e4m3.h), written by the fp8 append
// kernel. attend() first reads the block's visible pages back to bf16 into a
// staging page set (one block's worth, shared by all blocks, listed by a
// second device table, with a TMA map over it where the wgmma-ws kernel can
// use one), then runs the bf16 attention kernels on it unchanged: the stored cache takes 53% of bf16's memory, attention costs one
// extra pass over the block's keys. (Dequantising inside the attention
// kernels' shared-memory tiles, or fp8 wgmma, would save that pass: not done.)
//
// gather_visible() returns float32 CPU tensors (it synchronises; for tests).
#pragma once

#include "backend/cuda/attention/attention.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/kv/kv_fp8.h"
#include "backend/cuda/kv/kv_table.h"
#include "kv/kv_cache.h"
#include "kv/page_planner.h"
#include "kv/step_tracker.h"

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace lingbot::cuda {

// Where a cache's kernels go, asked at every append and attend.
using KernelStream = std::function<cudaStream_t()>;

std::unique_ptr<kv::KvCache> make_cuda_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                                const kv::TokenLayout& tokens, int num_blocks, cudaStream_t stream,
                                                KernelStream kernel_stream = {});

class CudaKvCache final : public kv::KvCache {
 public:
  // kernel_stream empty: the kernels go to `stream` too.
  CudaKvCache(kv::Layout layout, const kv::CacheConfig& config, const kv::TokenLayout& tokens, int num_blocks,
              cudaStream_t stream, KernelStream kernel_stream = {});
  ~CudaKvCache() override;

  // k, v: device tensors [rows, H, D] or [rows, H * D], rows = num_frames * tokens_per_frame,
  // bf16 or f32 (both the same, and the same as earlier appends since reset).
  void begin_step(int num_frames, bool store) override;
  void append(int block, const Tensor& k, const Tensor& v) override;
  // q, out: device tensors of the storage dtype, [nq, H, D] or [nq, H * D].
  void attend(int block, const Tensor& q, Tensor& out) override;
  void end_step() override;
  // The step's appends and attends ran as a replayed CUDA graph: marks every
  // block appended (the table was uploaded by begin_step).
  void note_replayed_step() override;
  void reset() override;
  kv::CacheStats stats() const override;
  const kv::TokenLayout& layout() const override { return tokens_; }
  const kv::CacheConfig& config() const override { return config_; }
  int num_blocks() const override { return steps_.num_blocks(); }
  bool in_step() const override { return steps_.in_step(); }
  std::pair<Tensor, Tensor> gather_visible(int block) const override;

  // GPU specifics (tests, benchmarks, the backend).
  std::optional<DType> storage_dtype() const { return dtype_; }
  cudaStream_t stream() const { return stream_; }
  const KvTableHeader* device_table() const { return table_.device(); }
  // Forces attend()'s kernel and split count (splits 0 = automatic).
  void set_attention(AttentionKernel kernel, int splits = 0);
  // What the automatic kernel choice picks on Hopper (attention.h's
  // auto_choice: Auto, Mma or WgmmaWs; the backend's attention_kernel).
  void set_auto_attention(AttentionKernel auto_choice) { auto_choice_ = auto_choice; }
  // Whether the wgmma-ws kernel may copy key tiles with TMA where the cache
  // has tensor maps (bf16, head_dim 64, pages of at least a tile; default
  // on). Off, every tile is copied row by row with cp.async: the way to
  // compare the two (bench/attention_cuda_bench.cpp). From the next step on.
  void set_tma(bool enabled) { tma_enabled_ = enabled; }
  // fp8 storage: whether attend() reads the pages back to bfloat16 staging
  // pages before a bf16 kernel runs (the default), or, off, lets the
  // wgmma-ws kernel dequantise each key tile in shared memory itself where
  // it can (Hopper, head_dim 64): no staging pages, the same bits. The
  // in-kernel reader is not the default because it is slower today (its
  // producer waits on each pass's loads: docs/attention-kernel.md); tests
  // and the benchmark turn it on. From the next step on.
  void set_fp8_read_back(bool enabled) { fp8_read_back_ = enabled; }
  // Whether this cache's attend() reads fp8 pages in the kernel (no staging).
  bool fp8_in_kernel() const;

 private:
  const kv::StepPlan& planner_begin(int num_frames, bool store);
  void planner_end();
  const kv::StepPlan& planner_plan() const;
  kv::PageTable planner_stored_table() const;
  const kv::WindowPolicy& planner_window() const;

  cudaStream_t kernel_stream() const { return kernel_stream_ ? kernel_stream_() : stream_; }
  void synchronize() const;  // the home stream and the kernel stream now
  int64_t row_bytes() const;   // one token's K (or V) in the storage dtype (fp8: the codes)
  int64_t page_bytes() const;  // one page, K and V (fp8: codes and scales)
  Fp8PageShape fp8_shape() const;
  void ensure_staging(int32_t pages);  // fp8: bf16 staging for `pages` visible pages
  void stage_step();                   // fp8: the step's staging pages and their table (read-back kernels)
  char* page_ptr(int32_t page) const;  // block 0's copy
  void ensure_chunks(int32_t pool_pages);
  void free_pages();  // every page chunk and the fp8 staging pages (after waiting for the streams)
  void upload_step();  // the open step's table -> device
  void check_rows(const Tensor& t, int64_t rows, const char* what) const;

  kv::Layout layout_;
  kv::CacheConfig config_;
  kv::TokenLayout tokens_;
  cudaStream_t stream_;
  KernelStream kernel_stream_;
  cudaEvent_t uploaded_ = nullptr;  // orders an upload inside append() before another stream's kernels
  std::unique_ptr<kv::PagePlanner> planner_;  // routing by layout (see above)
  kv::StepTracker steps_;
  int32_t page_size_ = 0;
  int32_t pages_per_chunk_ = 1;

  std::optional<DType> dtype_;  // dtype of the appends and queries, fixed by the first append since reset
  std::optional<DType> chunks_dtype_;  // the dtype the allocated pages were sized for (kept across reset)
  bool fp8_ = false;            // storage: e4m3 codes + scales (else dtype_)
  char* staging_ = nullptr;     // fp8: bf16 pages of one block's visible keys
  int32_t staging_pages_ = 0;
  std::optional<TensorMap> staging_map_;  // fp8: TMA over the staging pages (one chunk), where TMA serves
  KvTable staging_table_;       // fp8: the staging pages as attention reads them
  std::vector<char*> chunks_;   // device memory: [block][pages_per_chunk][page]
  std::vector<TensorMap> tensor_maps_;  // one per chunk, or none (no TMA for this cache)
  bool tma_enabled_ = true;
  bool fp8_read_back_ = true;
  bool step_staged_ = false;  // fp8: this step's staging table is uploaded
  KvTableHeader step_header_;        // the step's table as uploaded
  std::vector<char*> step_pages_;    // its visible pages (block 0's addresses)
  int64_t bytes_reserved_ = 0;
  int64_t bytes_allocated_total_ = 0;
  bool step_uploaded_ = false;

  KvTable table_;
  DeviceScratch scratch_;
  AttentionKernel kernel_ = AttentionKernel::Auto;
  AttentionKernel auto_choice_ = AttentionKernel::Auto;
  int splits_ = 0;
};

}  // namespace lingbot::cuda
