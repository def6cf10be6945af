// The streaming aggregator's KV cache: public interface.
//
// One KvCache holds the caches of `num_blocks` attention blocks that share one
// structure (the 24 global blocks of the aggregator, or the blocks of one
// camera-head iteration). All blocks store the same frames and evict the same
// frames at the same step; only their K/V values differ. The semantics are
// those of upstream's SDPA ("dictionary") cache, see docs/kv-cache.md:
//
//   visible = retained special tokens of evicted frames + every token of the
//             frames still in the frame list (first S "scale" frames + last W)
//
// A step is `num_frames` new frames passing once through every block:
//
//   begin_step(F, store)
//   for each block (any order): append(block, k, v); attend(block, q, out)
//   end_step()
//
// store = true (a keyframe, or the scale phase): the F frames are stored, then
// eviction runs ONCE for the whole step (this matches upstream's SDPA path,
// which concatenates all F frames and then evicts), then attend() sees the
// cache after append and eviction.
// store = false (a non-keyframe): attend() sees everything stored (no eviction
// applied) plus the step's own tokens; end_step() leaves every visible token,
// the page table and all bookkeeping exactly as before begin_step().
//
// Where things happen (one step from the folder names):
//   kv/window_policy.*  which frames are evicted, which specials are retained
//   kv/page_planner.*   paged layout: which page/slot each token row goes to,
//                       which pages are freed, the visible page table
//   kv/page_pool.*      page id accounting (free list, growth in chunks)
//   backend/cpu/dense_kv_cache.*, backend/cpu/paged_kv_cache.*: the CPU stores
//   backend/cpu/attention.*: attention over the visible keys (reads pages in place)
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace lingbot::kv {

// How a store keeps its keys and values (--kv-dtype). Auto: the backend's
// compute type (float32 on the CPU, bfloat16 on the GPU; in the CPU's bf16
// mode bfloat16 where the keys come in bfloat16, bf16_kv_bridge.h). Fp8: e4m3 with a
// float32 scale per token and head (kv/fp8_e4m3.h says why that granularity).
// Attention always computes in float32 (CPU) / with bf16 operands (GPU) over
// the values read back.
enum class KvDtype : uint8_t { Auto, Bf16, Fp8 };
std::string_view kv_dtype_name(KvDtype dtype);
KvDtype parse_kv_dtype(std::string_view name);  // "auto" | "bf16" | "fp8"; throws naming the value

struct CacheConfig {
  int sliding_window = 64;           // W: most recent frames kept whole (>= 1)
  int scale_frames = 8;              // S: first stored frames kept whole (>= 0)
  bool cross_frame_special = true;   // evicted frames leave their special tokens behind
  bool include_scale_frames = true;  // the first S frames stay (false: upstream's quirk, see window_policy.h)
  bool camera_only = false;          // ... of those special tokens keep only the camera token
  // Paged layout only: the page pool grows by this many pages at a time (>= 1).
  // Upstream sizes its pool once and asserts when it runs out; ours grows.
  int pool_growth_pages = 4;
  KvDtype dtype = KvDtype::Auto;     // storage of K and V

  bool operator==(const CacheConfig&) const = default;
};

struct TokenLayout {
  int num_special = 6;   // per frame, first in the frame: [camera, register x4, scale]; camera at index 0
  int num_patches = 0;   // patch tokens per frame, after the specials
  int num_heads = 16;
  int head_dim = 64;
  int tokens_per_frame() const { return num_special + num_patches; }
  int64_t row_floats() const { return int64_t{num_heads} * head_dim; }  // one token's K (or V)
};

// Throws lingbot::Error naming the bad field.
void validate(const CacheConfig& config);
void validate(const TokenLayout& layout);

enum class Layout { Dense, Paged };
std::string_view layout_name(Layout layout);

// Occupancy snapshot. Frame and token counts are per block (every block has
// the same structure); byte counts are summed over all blocks.
struct CacheStats {
  Layout layout = Layout::Dense;
  int num_blocks = 0;
  int64_t frames_seen = 0;      // frames passed through since reset (stored + non-keyframes)
  int64_t frames_stored = 0;    // frames stored since reset
  int64_t frames_listed = 0;    // frames in the frame list (= scale_frames + window_frames)
  int64_t scale_frames = 0;     // pinned first frames (include_scale_frames), never evicted
  int64_t window_frames = 0;    // recent frames, evicted first in, first out
  int64_t frames_evicted = 0;   // frames that left the list since reset
  int64_t special_tokens_retained = 0;  // specials of evicted frames, visible forever
  int64_t visible_tokens = 0;   // keys attend() sees outside a step (stored cache)
  // Paged layout only (zero for dense).
  int32_t page_size = 0;        // tokens per page
  int64_t pages_pool = 0;       // page ids in the pool (= in use + free)
  int64_t pages_in_use = 0;
  int64_t pages_free = 0;
  int64_t frame_pages = 0;      // pages holding frame tokens (scale + window)
  int64_t special_pages = 0;    // pages of the append-only special stream
  int64_t special_stream_tokens = 0;  // tokens in the special stream
  // Memory, all blocks together.
  int64_t bytes_in_use = 0;     // K/V bytes of the tokens (dense) or pages (paged) held
  int64_t bytes_reserved = 0;   // K/V bytes allocated (kept across reset(): the next stream reuses them)
  // Every allocation of K/V memory since the cache was made, reset() or not:
  // unchanged over a second stream that fits in the first one's memory.
  int64_t bytes_allocated_total = 0;
  std::string_view storage = "float32";  // element type of the stored K/V: float32, bfloat16 or e4m3
};

// One line for logs and `--kv-stats`.
std::string format_stats(const CacheStats& stats);

class KvCache {  // the caches of `num_blocks` attention blocks that share one structure
 public:
  virtual ~KvCache() = default;
  // A step = `num_frames` new frames passing once through every block.
  // store=false is a non-keyframe: it attends to the cache plus its own tokens and leaves
  // the cache exactly as it was (bit for bit) after end_step().
  virtual void begin_step(int num_frames, bool store) = 0;
  // k, v: float32 CPU tensors [num_frames * tokens_per_frame, num_heads, head_dim]
  // (already qk-normed and RoPE-rotated), frames in order, each frame's specials
  // first. Called once per block per step, any block order. The cache copies the rows.
  virtual void append(int block, const Tensor& k, const Tensor& v) = 0;
  // q: [nq, num_heads, head_dim]; out: same shape, preallocated. Softmax over every visible
  // key of this block (the cache after this step's append and eviction, or for a non-keyframe
  // the cache before the step plus the step's own tokens), scale 1/sqrt(head_dim).
  virtual void attend(int block, const Tensor& q, Tensor& out) = 0;
  // Ends the step; throws (leaving the step open) if a block was not appended.
  virtual void end_step() = 0;
  // CUDA graphs: the device part of the current step was replayed from a
  // recording, so every block's append and attend ran on the device without
  // the host calling them. Marks them done, so that end_step() proceeds.
  // Only device stores whose kernels read the step plan from device memory
  // can be replayed; the default refuses.
  virtual void note_replayed_step() {
    fail("this KV cache cannot be driven by a replayed graph (layout {})", "cpu");
  }
  // New video: empty, every page returned to the pool. The CPU stores keep
  // their allocations for the next stream (the dense one keeps its memory
  // faulted in; the paged one gives its pages' memory back to the system and
  // faults in again only the pages the next stream uses); destroying the
  // cache releases them.
  virtual void reset() = 0;
  // Frees staging memory a store keeps from call to call (sized by the
  // largest step so far, e.g. the scale frames'); later calls allocate what
  // they need again. Between calls only; the stored keys and values stay.
  virtual void release_scratch() {}
  virtual CacheStats stats() const = 0;
  virtual const TokenLayout& layout() const = 0;

  // Additions beyond the model's needs (tests, debugging, tools).
  virtual const CacheConfig& config() const = 0;
  virtual int num_blocks() const = 0;
  virtual bool in_step() const = 0;
  // Copies of the keys and values attend(block) would read now, in the order it
  // reads them: [n, num_heads, head_dim] each. Inside a step (after append(block)):
  // the step's view; outside a step: the stored cache.
  virtual std::pair<Tensor, Tensor> gather_visible(int block) const = 0;
};

// CPU stores (float32, or bf16 / fp8 storage per config.dtype; attention in
// float32 over the values read back). Declared here, defined in backend/cpu (they attend with
// cpu::attention). Nothing is allocated until the first step.
std::unique_ptr<KvCache> make_cpu_cache(Layout layout, const CacheConfig& config,
                                        const TokenLayout& layout_of_tokens, int num_blocks);

}  // namespace lingbot::kv
