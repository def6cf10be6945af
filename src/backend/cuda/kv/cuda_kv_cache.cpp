#include "backend/cuda/kv/cuda_kv_cache.h"

#include "backend/cuda/attention/attention_launch.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv/kv_append.h"
#include "core/error.h"
#include "core/half.h"
#include "kv/fp8_e4m3.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace lingbot::cuda {

namespace {

// Dense layout: pages per chunk so that a chunk holds about this much per
// block (f32), like the CPU dense store's slabs.
constexpr int64_t kDenseChunkBytes = int64_t{4} << 20;

int32_t dense_pages_per_chunk(const kv::CacheConfig& config, const kv::TokenLayout& tokens) {
  const kv::WindowPolicy window(config, tokens);
  const int64_t page_size = window.evicts() ? tokens.tokens_per_frame() : kv::PagePlanner::kStreamOnlyPageSize;
  const int64_t page_bytes_f32 = 2 * page_size * tokens.row_floats() * 4;
  return static_cast<int32_t>(std::clamp<int64_t>(kDenseChunkBytes / page_bytes_f32, 1, 64));
}

}  // namespace

std::unique_ptr<kv::KvCache> make_cuda_kv_cache(kv::Layout layout, const kv::CacheConfig& config,
                                                const kv::TokenLayout& tokens, int num_blocks, cudaStream_t stream,
                                                KernelStream kernel_stream) {
  kv::validate(config);
  kv::validate(tokens);
  LB_CHECK(num_blocks >= 1, "kv cache: num_blocks must be >= 1, got {}", num_blocks);
  return std::make_unique<CudaKvCache>(layout, config, tokens, num_blocks, stream, std::move(kernel_stream));
}

CudaKvCache::CudaKvCache(kv::Layout layout, const kv::CacheConfig& config, const kv::TokenLayout& tokens,
                         int num_blocks, cudaStream_t stream, KernelStream kernel_stream)
    : layout_(layout),
      config_(config),
      tokens_(tokens),
      stream_(stream),
      kernel_stream_(std::move(kernel_stream)),
      steps_(num_blocks),
      staging_table_(stream),
      table_(stream),
      scratch_(stream, "kv cache attention splits") {
  kv::validate(config);
  kv::validate(tokens);
  // Paged: upstream's page layout. Dense: whole frames in pages (the dense
  // semantics, one page per listed frame), in larger chunks.
  kv::CacheConfig planner_config = config;
  if (layout == kv::Layout::Dense) planner_config.pool_growth_pages = dense_pages_per_chunk(config, tokens);
  pages_per_chunk_ = planner_config.pool_growth_pages;
  planner_ = std::make_unique<kv::PagePlanner>(
      planner_config, tokens, layout == kv::Layout::Paged ? kv::PageRouting::Upstream : kv::PageRouting::WholeFrames);
  page_size_ = planner_->page_size();
  fp8_ = config.dtype == kv::KvDtype::Fp8;
  LB_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
}

CudaKvCache::~CudaKvCache() {
  // Kernels on either stream may still read the pages (the kernel stream
  // is not asked for: its owner may be gone already).
  (void)cudaDeviceSynchronize();
  for (char* c : chunks_) device_free(c);
  if (staging_) device_free(staging_);
  if (uploaded_) cudaEventDestroy(uploaded_);
}

void CudaKvCache::synchronize() const {
  LB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (kernel_stream() != stream_) LB_CUDA_CHECK(cudaStreamSynchronize(kernel_stream()));
}

// ---- the planner of the layout ------------------------------------------------

const kv::StepPlan& CudaKvCache::planner_begin(int num_frames, bool store) {
  return planner_->begin_step(num_frames, store);
}
void CudaKvCache::planner_end() { planner_->end_step(); }
const kv::StepPlan& CudaKvCache::planner_plan() const { return planner_->plan(); }
kv::PageTable CudaKvCache::planner_stored_table() const { return planner_->stored_table(); }
const kv::WindowPolicy& CudaKvCache::planner_window() const { return planner_->window(); }

// ---- memory -------------------------------------------------------------------

int64_t CudaKvCache::row_bytes() const {
  if (!dtype_) return 0;
  return tokens_.row_floats() * (fp8_ ? 1 : static_cast<int64_t>(dtype_size(*dtype_)));
}
int64_t CudaKvCache::page_bytes() const {
  return fp8_ ? fp8_shape().page_bytes() : 2 * int64_t{page_size_} * row_bytes();
}
Fp8PageShape CudaKvCache::fp8_shape() const { return {page_size_, tokens_.num_heads, tokens_.head_dim}; }

void CudaKvCache::ensure_staging(int32_t pages) {
  if (pages <= staging_pages_) return;
  check_not_capturing(stream_, "growing the fp8 kv cache's staging pages");
  // Two pages of room: the special stream adds a page every page_size / 6
  // frames (162 at 378 x 504), so this regrows rarely, and never by more
  // than the stream needs (a proportional step would hold tens of unused
  // 4 MB pages on a long stream).
  const int32_t want = pages + 2;
  const int64_t page = 2 * int64_t{page_size_} * tokens_.row_floats() * 2;  // bf16
  synchronize();  // an earlier step's kernels may still read the old pages
  if (staging_) device_free(staging_);
  staging_ = nullptr;
  bytes_reserved_ -= int64_t{staging_pages_} * page;
  staging_pages_ = 0;
  staging_ = static_cast<char*>(device_malloc(static_cast<size_t>(want * page), "fp8 kv cache staging pages"));
  staging_pages_ = want;
  bytes_reserved_ += int64_t{want} * page;
  // The staging pages are one chunk of `want` pages for "block 0".
  staging_map_ = kv_chunk_tensor_map({staging_, int64_t{2} * want, page_size_, tokens_.num_heads, tokens_.head_dim},
                                     attn::kWsPagedKeyTile);
  bytes_allocated_total_ += int64_t{want} * page;
}

char* CudaKvCache::page_ptr(int32_t page) const {
  return chunks_[static_cast<size_t>(page / pages_per_chunk_)] + int64_t{page % pages_per_chunk_} * page_bytes();
}

void CudaKvCache::ensure_chunks(int32_t pool_pages) {
  LB_ASSERT(dtype_.has_value());
  const int64_t chunk_bytes = int64_t{num_blocks()} * pages_per_chunk_ * page_bytes();
  while (static_cast<int64_t>(chunks_.size()) * pages_per_chunk_ < pool_pages) {
    check_not_capturing(stream_, "growing the kv cache");
    chunks_.push_back(static_cast<char*>(device_malloc(static_cast<size_t>(chunk_bytes), "kv cache pages")));
    bytes_reserved_ += chunk_bytes;
    bytes_allocated_total_ += chunk_bytes;
    // A TMA map per chunk (bf16 pages that hold a whole tile), or none at all.
    if (*dtype_ == DType::BF16 && !fp8_ && (chunks_.size() == 1 || !tensor_maps_.empty())) {
      const KvChunkGeometry geometry{chunks_.back(), int64_t{2} * num_blocks() * pages_per_chunk_, page_size_,
                                     tokens_.num_heads, tokens_.head_dim};
      if (auto map = kv_chunk_tensor_map(geometry, attn::kWsPagedKeyTile)) {
        tensor_maps_.push_back(*map);
      } else {
        tensor_maps_.clear();
      }
    }
  }
}

// fp8 pages read back for a bf16 kernel: the staging pages in visible
// order, and the table through which the kernel reads them, for the step
// whose table upload_step() made.
void CudaKvCache::stage_step() {
  const std::vector<char*>& pages = step_pages_;
  ensure_staging(step_header_.num_pages);
  KvTableHeader sh = step_header_;
  sh.num_moves = 0;
  sh.row_bytes = tokens_.row_floats() * 2;
  sh.v_offset = int64_t{page_size_} * sh.row_bytes;
  sh.block_stride = 0;
  sh.scale_v_offset = 0;
  std::vector<char*> staged;
  std::vector<int32_t> staged_ids;  // visible page i is staging page i
  for (size_t i = 0; i < pages.size(); ++i) {
    staged.push_back(staging_ + static_cast<int64_t>(i) * 2 * sh.v_offset);
    staged_ids.push_back(static_cast<int32_t>(i));
  }
  if (tma_enabled_ && staging_map_) {
    sh.pages_per_chunk = staging_pages_;
    sh.tma_box_rows = attn::kWsPagedKeyTile;
    sh.num_tensor_maps = 1;
    staging_table_.upload(sh, staged, {}, staged_ids, {*staging_map_});
  } else {
    sh.num_tensor_maps = 0;
    staging_table_.upload(sh, staged, {});
  }
  step_staged_ = true;
}

void CudaKvCache::upload_step() {
  const kv::StepPlan& plan = planner_plan();
  ensure_chunks(plan.pool_pages);
  const int64_t rb = row_bytes();

  std::vector<DeviceRowMove> moves;
  for (const RowMove& m : row_moves(plan)) {
    DeviceRowMove d{};
    d.dst = page_ptr(m.dst_page) + int64_t{m.dst_slot} * rb;
    if (m.src_page >= 0) {
      d.src = page_ptr(m.src_page) + m.src * rb;
    } else {
      d.src = nullptr;
      d.src_row = m.src;
    }
    if (fp8_) {  // the slots' K scales, after the page's codes
      const int64_t scale_bytes = int64_t{tokens_.num_heads} * 4;
      d.dst_scales = page_ptr(m.dst_page) + fp8_shape().codes_bytes() + int64_t{m.dst_slot} * scale_bytes;
      if (m.src_page >= 0) d.src_scales = page_ptr(m.src_page) + fp8_shape().codes_bytes() + m.src * scale_bytes;
    }
    moves.push_back(d);
  }
  std::vector<char*> pages;
  pages.reserve(plan.visible.page_ids.size());
  for (int32_t id : plan.visible.page_ids) pages.push_back(page_ptr(id));
  const bool tma = tma_enabled_ && tensor_maps_.size() == chunks_.size() && !chunks_.empty();

  const int64_t num_keys = plan.visible.num_tokens();
  LB_CHECK(num_keys <= std::numeric_limits<int32_t>::max() && moves.size() <= size_t{1} << 30,
           "kv cache: {} visible keys is more than the GPU kernels index", num_keys);
  KvTableHeader h;
  h.num_keys = static_cast<int32_t>(num_keys);
  h.num_pages = plan.visible.num_pages();
  h.page_size = page_size_;
  h.num_moves = static_cast<int32_t>(moves.size());
  h.page_div = FastDiv::make(page_size_);
  h.row_bytes = rb;
  h.v_offset = int64_t{page_size_} * rb;
  h.block_stride = int64_t{pages_per_chunk_} * page_bytes();
  h.scale_v_offset = fp8_ ? fp8_shape().scales_v_offset() : 0;
  h.pages_per_chunk = pages_per_chunk_;
  h.tma_box_rows = attn::kWsPagedKeyTile;
  h.num_tensor_maps = tma ? static_cast<int32_t>(tensor_maps_.size()) : 0;
  if (tma) {
    table_.upload(h, pages, moves, plan.visible.page_ids, tensor_maps_);
  } else {
    table_.upload(h, pages, moves);
  }
  step_header_ = h;
  step_pages_ = std::move(pages);
  step_staged_ = false;
  if (fp8_ && !fp8_in_kernel()) stage_step();
  step_uploaded_ = true;
}

// ---- the step protocol ------------------------------------------------------------

void CudaKvCache::begin_step(int num_frames, bool store) {
  steps_.check_begin(num_frames);
  planner_begin(num_frames, store);
  steps_.begin(num_frames, store);
  step_uploaded_ = false;
  if (dtype_) upload_step();  // else at the first append, which fixes the dtype
}

void CudaKvCache::check_rows(const Tensor& t, int64_t rows, const char* what) const {
  LB_CHECK(t.defined(), "kv cache: {} is an undefined tensor", what);
  LB_CHECK(t.device() == Device::CUDA, "kv cache: {} must be on the GPU, got {}", what, t.describe());
  LB_CHECK(t.dtype() == DType::BF16 || t.dtype() == DType::F32, "kv cache: {} must be bfloat16 or float32, got {}",
           what, t.describe());
  const bool shape_ok = (t.ndim() == 3 && t.dim(1) == tokens_.num_heads && t.dim(2) == tokens_.head_dim) ||
                        (t.ndim() == 2 && t.dim(1) == tokens_.row_floats());
  LB_CHECK(shape_ok && (rows < 0 || t.dim(0) == rows), "kv cache: {} must be [{}, {}, {}], got {}", what,
           rows < 0 ? std::string("n") : std::to_string(rows), tokens_.num_heads, tokens_.head_dim, t.describe());
}

void CudaKvCache::append(int block, const Tensor& k, const Tensor& v) {
  steps_.check_append(block);
  const int64_t rows = int64_t{steps_.num_frames()} * tokens_.tokens_per_frame();
  check_rows(k, rows, "append: k");
  check_rows(v, rows, "append: v");
  LB_CHECK(k.dtype() == v.dtype(), "kv cache: append: k is {} but v is {}", dtype_name(k.dtype()),
           dtype_name(v.dtype()));
  LB_CHECK(!dtype_ || *dtype_ == k.dtype(), "kv cache: append: the cache stores {}, got {} (reset to change)",
           dtype_name(*dtype_), dtype_name(k.dtype()));
  LB_CHECK(!fp8_ || k.dtype() == DType::BF16, "kv cache: fp8 storage on the GPU takes bfloat16 K/V, got {}",
           dtype_name(k.dtype()));
  if (!dtype_) {
    dtype_ = k.dtype();
    if (chunks_dtype_ && *chunks_dtype_ != *dtype_) free_pages();  // kept pages of another size
    chunks_dtype_ = dtype_;
  }
  const cudaStream_t stream = kernel_stream();
  if (!step_uploaded_) {
    // The first step since construction or reset (the dtype was unknown
    // until now): the upload goes to the home stream, which the kernels'
    // stream then waits for.
    upload_step();
    if (stream != stream_) {
      LB_CUDA_CHECK(cudaEventRecord(uploaded_, stream_));
      LB_CUDA_CHECK(cudaStreamWaitEvent(stream, uploaded_, 0));
    }
  }

  if (fp8_) {
    launch_kv_append_fp8(table_.device(), block, k.data(), v.data(), /*input_is_bf16=*/true, fp8_shape(), stream);
    steps_.mark_appended(block);
    return;
  }
  const int unit = kv_append_unit_bytes(row_bytes(), reinterpret_cast<uintptr_t>(k.data()),
                                        reinterpret_cast<uintptr_t>(v.data()));
  LB_CHECK(unit >= 2, "kv cache: append: k {} at {} and v {} at {} must be at least 2-byte aligned (block {})",
           k.describe(), k.data(), v.describe(), v.data(), block);
  launch_kv_append(table_.device(), block, k.data(), v.data(), unit, stream);
  steps_.mark_appended(block);
}

void CudaKvCache::attend(int block, const Tensor& q, Tensor& out) {
  steps_.check_attend(block);
  check_rows(q, -1, "attend: q");
  check_rows(out, q.dim(0), "attend: out");
  LB_CHECK(q.dtype() == *dtype_ && out.dtype() == *dtype_, "kv cache: attend: q and out must be {} like the "
           "cache, got {} and {}", dtype_name(*dtype_), dtype_name(q.dtype()), dtype_name(out.dtype()));
  if (fp8_ && fp8_in_kernel()) {
    attention_paged_fp8(q, table_.device(), block, tokens_.num_heads, tokens_.head_dim, out, scratch_,
                        kernel_stream(), kernel_, splits_, auto_choice_);
    return;
  }
  if (fp8_) {
    const cudaStream_t stream = kernel_stream();
    if (!step_staged_) {
      // The kernel was chosen after the step began (tests switch kernels
      // within a step): stage now, ordered before the kernels' stream.
      check_not_capturing(stream_, "reading fp8 pages back for a kernel chosen during the step");
      stage_step();
      if (stream != stream_) {
        LB_CUDA_CHECK(cudaEventRecord(uploaded_, stream_));
        LB_CUDA_CHECK(cudaStreamWaitEvent(stream, uploaded_, 0));
      }
    }
    launch_kv_dequantise(table_.device(), block, staging_table_.device(), fp8_shape(), stream);
    attention_paged(q, staging_table_.device(), 0, tokens_.num_heads, tokens_.head_dim, out, scratch_, stream,
                    kernel_, splits_, auto_choice_);
    return;
  }
  attention_paged(q, table_.device(), block, tokens_.num_heads, tokens_.head_dim, out, scratch_, kernel_stream(),
                  kernel_, splits_, auto_choice_);
}

void CudaKvCache::note_replayed_step() {
  LB_CHECK(steps_.in_step(), "kv cache: note_replayed_step outside a step (call begin_step first)");
  LB_CHECK(step_uploaded_ && dtype_.has_value(),
           "kv cache: a replayed step needs a cache that has run a step eagerly since construction or reset");
  for (int b = 0; b < num_blocks(); ++b) {
    if (!steps_.appended(b)) steps_.mark_appended(b);
  }
}

void CudaKvCache::end_step() {
  steps_.check_end();
  planner_end();
  steps_.end();
}

void CudaKvCache::reset() {
  synchronize();  // kernels may still read the pages
  // The pages' memory stays for the next stream, as the CPU store's does:
  // its steps then allocate nothing until it outgrows this one (a stream's
  // scale step would otherwise wait for a cudaMalloc per page chunk, and
  // the windowed mode for a whole window's pool at every window). It goes
  // if the next stream stores another element type (free_pages()).
  step_uploaded_ = false;
  planner_->reset();
  steps_.reset();
  dtype_.reset();
}

void CudaKvCache::free_pages() {
  synchronize();
  for (char* c : chunks_) device_free(c);
  chunks_.clear();
  tensor_maps_.clear();
  if (staging_) device_free(staging_);
  staging_ = nullptr;
  staging_pages_ = 0;
  staging_map_.reset();
  bytes_reserved_ = 0;
  chunks_dtype_.reset();
}

bool CudaKvCache::fp8_in_kernel() const {
  // The kernel's 16-byte loads of codes need 16-byte aligned pages.
  return fp8_ && !fp8_read_back_ && fp8_shape().page_bytes() % 16 == 0 &&
         fp8_attention_in_kernel(kernel_, tokens_.head_dim, auto_choice_);
}

void CudaKvCache::set_attention(AttentionKernel kernel, int splits) {
  LB_CHECK(splits >= 0, "kv cache: splits must be >= 0, got {}", splits);
  kernel_ = kernel;
  splits_ = splits;
}

// ---- inspection ---------------------------------------------------------------------

std::pair<Tensor, Tensor> CudaKvCache::gather_visible(int block) const {
  LB_CHECK(block >= 0 && block < num_blocks(), "kv cache: gather_visible: block {} out of range [0, {})", block,
           num_blocks());
  kv::PageTable table;
  if (steps_.in_step()) {
    steps_.check_attend(block);
    table = planner_plan().visible;
  } else {
    table = planner_stored_table();
  }
  const int64_t n = dtype_ ? table.num_tokens() : 0;
  Tensor k = Tensor::empty({n, tokens_.num_heads, tokens_.head_dim});
  Tensor v = Tensor::empty({n, tokens_.num_heads, tokens_.head_dim});
  if (n == 0) return {std::move(k), std::move(v)};

  synchronize();
  const int64_t rb = row_bytes();
  const int64_t row = tokens_.row_floats();
  const int64_t block_offset = int64_t{block} * pages_per_chunk_ * page_bytes();
  std::vector<char> staging(static_cast<size_t>(int64_t{page_size_} * rb));
  std::vector<float> scales(static_cast<size_t>(int64_t{page_size_} * tokens_.num_heads));
  int64_t at = 0;  // token
  for (int32_t i = 0; i < table.num_pages(); ++i) {
    const int64_t len = table.page_len(i);
    const char* page = page_ptr(table.page_ids[static_cast<size_t>(i)]) + block_offset;
    for (int kv_index = 0; kv_index < 2; ++kv_index) {
      if (fp8_) {
        const Fp8PageShape shape = fp8_shape();
        LB_CUDA_CHECK(cudaMemcpy(staging.data(), page + kv_index * int64_t{page_size_} * rb,
                                 static_cast<size_t>(len * rb), cudaMemcpyDeviceToHost));
        LB_CUDA_CHECK(cudaMemcpy(scales.data(), page + shape.codes_bytes() + kv_index * shape.scales_v_offset(),
                                 static_cast<size_t>(len * tokens_.num_heads) * sizeof(float), cudaMemcpyDeviceToHost));
        float* dst = (kv_index == 0 ? k : v).f32() + at * row;
        const auto* codes = reinterpret_cast<const uint8_t*>(staging.data());
        for (int64_t e = 0; e < len * row; ++e)
          dst[e] = kv::e4m3_to_f32(codes[e]) * scales[static_cast<size_t>(e / tokens_.head_dim)];
        continue;
      }
      LB_CUDA_CHECK(cudaMemcpy(staging.data(), page + kv_index * int64_t{page_size_} * rb,
                               static_cast<size_t>(len * rb), cudaMemcpyDeviceToHost));
      float* dst = (kv_index == 0 ? k : v).f32() + at * row;
      if (*dtype_ == DType::F32) {
        std::memcpy(dst, staging.data(), static_cast<size_t>(len * rb));
      } else {
        const auto* src = reinterpret_cast<const uint16_t*>(staging.data());
        for (int64_t e = 0; e < len * row; ++e) dst[e] = bf16_to_f32(src[e]);
      }
    }
    at += len;
  }
  return {std::move(k), std::move(v)};
}

kv::CacheStats CudaKvCache::stats() const {
  kv::CacheStats s;
  s.layout = layout_;
  s.num_blocks = num_blocks();
  s.frames_seen = steps_.frames_seen();
  planner_window().report(s);
  if (layout_ == kv::Layout::Paged) {  // page figures, as the CPU paged store reports them
    planner_->report(s);
    s.bytes_in_use = s.pages_in_use * page_bytes() * num_blocks();
  } else {
    const int64_t scales = fp8_ ? int64_t{tokens_.num_heads} * 4 : 0;
    s.bytes_in_use = s.visible_tokens * 2 * (row_bytes() + scales) * num_blocks();
  }
  s.bytes_reserved = bytes_reserved_;
  s.bytes_allocated_total = bytes_allocated_total_;
  s.storage = fp8_ ? "e4m3" : !dtype_ ? "(none yet)" : *dtype_ == DType::BF16 ? "bfloat16" : "float32";
  return s;
}

}  // namespace lingbot::cuda
