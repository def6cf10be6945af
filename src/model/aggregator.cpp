#include "model/aggregator.h"

#include "core/profiler.h"

#include <fmt/format.h>

namespace lingbot {

namespace {
constexpr float kNormEps = 1e-5f;  // nn.LayerNorm default in the aggregator's blocks
}

Aggregator::Aggregator(Backend& be, const DeviceWeights& w, const ModelConfig& config, kv::Layout layout,
                       const kv::CacheConfig& cache_config, int num_scale_frames)
    : be_(be),
      w_(w),
      config_(config),
      layout_(layout),
      cache_config_(cache_config),
      num_scale_frames_(num_scale_frames),
      encoder_(be, w, config) {
  for (int i = 0; i < config.depth; ++i) {
    frame_blocks_.push_back(BlockWeights::bind(w, fmt::format("aggregator.frame_blocks.{}", i), config.embed_dim,
                                               config.num_heads, config.qk_norm, kNormEps));
    global_blocks_.push_back(BlockWeights::bind(w, fmt::format("aggregator.global_blocks.{}", i), config.embed_dim,
                                                config.num_heads, config.qk_norm, kNormEps));
  }
  // The special tokens of a frame depend only on its position in the stream:
  // camera and register tokens use version 0 for the very first frame,
  // the scale token version 0 for the first num_scale_frames frames.
  const int E = config.embed_dim, R = config.num_register_tokens, n = config.num_special_tokens();
  const Tensor camera = w.host("aggregator.camera_token");
  const Tensor scale = w.host("aggregator.scale_token");
  const Tensor registers = R > 0 ? w.host("aggregator.register_token") : Tensor();
  const std::array<std::array<int, 2>, 3> versions = {{{0, 0}, {1, 0}, {1, 1}}};  // (camera/register, scale)
  for (size_t b = 0; b < versions.size(); ++b) {
    Tensor block = Tensor::empty({n, E});
    const int v = versions[b][0], s = versions[b][1];
    std::copy_n(camera.f32() + v * E, E, block.f32());
    for (int r = 0; r < R; ++r) std::copy_n(registers.f32() + (v * R + r) * E, E, block.f32() + (1 + r) * E);
    std::copy_n(scale.f32() + s * E, E, block.f32() + (1 + R) * E);
    special_blocks_[b] = be.upload(block, be.residual_dtype());
  }
}

const Tensor& Aggregator::special_block(int64_t position) {
  if (position == 0) return special_blocks_[0];
  if (position < num_scale_frames_) return special_blocks_[1];
  return special_blocks_[2];
}

void Aggregator::prepare_for_grid(const FrameGrid& grid) {
  if (grid.gh == grid_.gh && grid.gw == grid_.gw && cache_) return;
  LB_CHECK(!cache_ || cache_->stats().frames_seen == 0,
           "frame size changed from {}x{} to {}x{} patches in the middle of a stream; reset first", grid_.gh,
           grid_.gw, grid.gh, grid.gw);
  grid_ = grid;
  Tensor cos, sin;
  rope2d_table(grid, config_.head_dim(), config_.rope_freq, cos, sin);
  rope2d_.cos = be_.upload(cos, DType::F32);
  rope2d_.sin = be_.upload(sin, DType::F32);
  rope2d_.pairs = RopeTable::Pairs::HalfSplit;
  const kv::TokenLayout tokens{grid.num_special, grid.gh * grid.gw, config_.num_heads, config_.head_dim()};
  cache_ = be_.make_kv_cache(layout_, cache_config_, tokens, config_.depth);
}

void Aggregator::reset() {
  if (cache_) cache_->reset();
  frames_stored_ = 0;
}

void Aggregator::prepare(Workspace& ws, int frames, int height, int width, bool store) {
  LB_CHECK(!step_.active, "internal error: aggregator step prepared twice");
  const int p = config_.patch_size;
  const FrameGrid grid{config_.num_special_tokens(), height / p, width / p};
  prepare_for_grid(grid);
  step_.frames = frames;
  step_.store = store;
  step_.specials.clear();
  for (int i = 0; i < frames; ++i) step_.specials.push_back(&special_block(frames_stored_ + i));
  // Positions of this step's tokens for the global blocks: 3D RoPE with the
  // global frame index (advanced only by stored frames), else 2D.
  step_.rope_global = rope2d_;
  if (config_.enable_3d_rope) {
    Tensor cos, sin;
    rope3d_table(grid, config_.head_dim(), config_.rope3d_fhw_dim, config_.rope3d_theta, frames_stored_, frames, cos,
                 sin);
    Tensor& dcos = ws.get("agg.rope3d.cos", cos.shape(), DType::F32);
    Tensor& dsin = ws.get("agg.rope3d.sin", sin.shape(), DType::F32);
    // A streamed frame's table is written every step, a scale step's once.
    if (frames == 1) {
      be_.upload_into(cos, dcos);
      be_.upload_into(sin, dsin);
    } else {
      be_.upload_once_into(cos, dcos);
      be_.upload_once_into(sin, dsin);
    }
    step_.rope_global = RopeTable{dcos, dsin, RopeTable::Pairs::Interleaved};
  }
  cache_->begin_step(frames, store);
  step_.active = true;
}

void Aggregator::finish() {
  LB_CHECK(step_.active, "internal error: aggregator step finished without prepare");
  cache_->end_step();
  if (step_.store) frames_stored_ += step_.frames;
  step_.active = false;
}

AggregatorOutput Aggregator::forward(Workspace& ws, const Tensor& images, bool store) {
  prepare(ws, static_cast<int>(images.dim(0)), static_cast<int>(images.dim(2)), static_cast<int>(images.dim(3)),
          store);
  const AggregatorOutput out = compute(ws, images);
  finish();
  return out;
}

AggregatorOutput Aggregator::compute(Workspace& ws, const Tensor& images) {
  LB_CHECK(step_.active && images.dim(0) == step_.frames, "internal error: aggregator compute without prepare");
  const int S = step_.frames;
  const FrameGrid grid = grid_;
  const int E = config_.embed_dim, H = config_.num_heads, D = config_.head_dim();
  const int64_t np = static_cast<int64_t>(grid.gh) * grid.gw;
  const int64_t T = grid.tokens();
  const int64_t N = S * T;
  const DType dt = be_.residual_dtype();  // the token stream between blocks

  // A scale step on the CPU frees each stage's buffers once they are dead,
  // so that its peak is not every stage's buffers for all its frames at
  // once: the CPU's ops complete before they return and no graph records
  // them (a GPU keeps them: its ops may still be queued). A streamed frame
  // keeps them, to reuse them next frame.
  const bool frees_dead_buffers = S > 1 && be_.device() == Device::CPU;
  // The aggregator's output layers are written as [frame block | global
  // block] straight into the heads' float32 input where the token stream is
  // float32 already, instead of through a copy and a joined copy (on the
  // CPU; the GPU keeps its concat).
  const bool writes_halves = dt == DType::F32 && be_.device() == Device::CPU;

  // Encoder, then [specials | patches] per frame.
  Tensor& patches = ws.get("agg.patches", {S * np, E}, dt);
  {
    ProfileScope p("encoder", [this] { be_.synchronize(); });
    encoder_.forward(ws, images, patches);
  }
  if (frees_dead_buffers) ws.release("enc.");
  Tensor& x = ws.get("agg.tokens", {N, E}, dt);
  for (int i = 0; i < S; ++i)
    be_.copy_rows(*step_.specials[static_cast<size_t>(i)], x, {1, grid.num_special, E, 0, 0, i * T, 0});
  be_.copy_rows(patches, x, {S, np, E, 0, np, grid.num_special, T});
  if (frees_dead_buffers) ws.release("agg.patches");

  const AttendFn within_frames = attend_within_groups(be_, S, H, D);
  kv::KvCache& cache = *cache_;
  int block_index = 0;
  const auto sync = [this] { be_.synchronize(); };
  const AttendFn through_cache = [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    {
      ProfileScope p("global_block.kv append", sync);
      cache.append(block_index, k.reshape({N, H, D}), v.reshape({N, H, D}));
    }
    ProfileScope p("global_block.kv attend", sync);
    Tensor out3 = out.reshape({N, H, D});
    cache.attend(block_index, q.reshape({N, H, D}), out3);
  };

  AggregatorOutput result;
  result.grid = grid;
  result.frames = S;
  size_t next_output = 0;
  for (int l = 0; l < config_.depth; ++l) {
    run_block(be_, ws, frame_blocks_[static_cast<size_t>(l)], x, &rope2d_, within_frames, "agg.block", "frame_block");
    const bool selected = next_output < config_.aggregator_output_layers.size() &&
                          config_.aggregator_output_layers[next_output] == l;
    Tensor* frame_out = nullptr;
    Tensor* out = nullptr;
    Tensor halves;  // out as [2N, E]: token t's frame half is row 2t, its global half row 2t + 1
    if (selected) {
      out = &ws.get(fmt::format("agg.out{}", next_output), {N, 2 * E}, DType::F32);
      if (writes_halves) {
        halves = out->reshape({2 * N, E});
        be_.copy_rows(x, halves, {N, 1, E, 0, 1, 0, 2});
      } else {
        frame_out = &ws.get("agg.frame_out", {N, E}, dt);
        be_.copy_rows(x, *frame_out, {1, N, E, 0, 0, 0, 0});
      }
    }
    block_index = l;
    run_block(be_, ws, global_blocks_[static_cast<size_t>(l)], x, &step_.rope_global, through_cache, "agg.block",
              "global_block");
    if (selected) {
      if (writes_halves) {
        be_.copy_rows(x, halves, {N, 1, E, 0, 1, 1, 2});
      } else {
        Tensor& joined = ws.get("agg.joined", {N, 2 * E}, dt);
        be_.concat_cols(*frame_out, x, joined);
        be_.convert(joined, *out);
      }
      result.layers[next_output++] = out;
    }
  }
  if (frees_dead_buffers) {
    // Only the output layers are read after the blocks (by the heads).
    ws.release("agg.block");
    ws.release("agg.tokens");
    be_.release_scratch();
    cache.release_scratch();
  }
  return result;
}

}  // namespace lingbot
