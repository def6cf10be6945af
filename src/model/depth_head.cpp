#include "model/depth_head.h"

#include "core/profiler.h"
#include "model/position_embedding.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace lingbot {

namespace {
const std::string kP = "depth_head";
constexpr float kNormEps = 1e-5f;
}  // namespace

DepthHead::DepthHead(Backend& be, const DeviceWeights& w, const ModelConfig& config)
    : be_(be), w_(w), config_(config) {}

const Tensor& DepthHead::position_embedding(int channels, int h, int w, double aspect) {
  const std::array<int, 3> key = {channels, h, w};
  auto it = pos_embed_.find(key);
  if (it == pos_embed_.end()) it = pos_embed_.emplace(key, be_.upload(dpt_pos_embed(channels, h, w, aspect), DType::F32)).first;
  return it->second;
}

const AxisEmbedding& DepthHead::position_embedding_axes(int channels, int h, int w, double aspect) {
  const std::array<int, 3> key = {channels, h, w};
  auto it = pos_embed_axes_.find(key);
  if (it == pos_embed_axes_.end()) {
    const AxisEmbedding host = dpt_pos_embed_axes(channels, h, w, aspect);
    it = pos_embed_axes_.emplace(key, AxisEmbedding{be_.upload(host.by_col, DType::F32), be_.upload(host.by_row, DType::F32)})
             .first;
  }
  return it->second;
}

void DepthHead::residual_unit(Workspace& ws, const std::string& prefix, Tensor& x, Tensor& out) {
  Tensor& mid = ws.get("dpt.rcu_mid", x.shape(), DType::F32);
  be_.relu(x, x);  // in place, as upstream's nn.ReLU(inplace=True): the skip below adds relu(x)
  be_.conv2d(x, w_.get(prefix + ".conv1.weight"), &w_.get(prefix + ".conv1.bias"), 1, 1, mid);
  be_.relu(mid, mid);
  be_.conv2d(mid, w_.get(prefix + ".conv2.weight"), &w_.get(prefix + ".conv2.bias"), 1, 1, out);
  be_.add(out, x, out);
}

void DepthHead::fuse(Workspace& ws, int index, Tensor& x, Tensor* skip, int h, int w, Tensor& out,
                     Tensor* resized_into) {
  const std::string p = fmt::format("{}.scratch.refinenet{}", kP, index);
  const Shape& s = x.shape();
  Tensor& sum = ws.get(fmt::format("dpt.fuse{}.sum", index), s, DType::F32);
  if (skip != nullptr) {
    Tensor& res = ws.get(fmt::format("dpt.fuse{}.res", index), s, DType::F32);
    residual_unit(ws, p + ".resConfUnit1", *skip, res);
    be_.add(x, res, sum);
  } else {
    be_.copy_rows(x, sum, {1, x.numel(), 1, 0, 0, 0, 0});
  }
  Tensor& unit = ws.get(fmt::format("dpt.fuse{}.unit", index), s, DType::F32);
  residual_unit(ws, p + ".resConfUnit2", sum, unit);
  Tensor& resized = resized_into != nullptr
                        ? *resized_into
                        : ws.get(fmt::format("dpt.fuse{}.resized", index), {s[0], s[1], h, w}, DType::F32);
  be_.resize_bilinear(unit, resized);
  be_.conv2d(resized, w_.get(p + ".out_conv.weight"), &w_.get(p + ".out_conv.bias"), 1, 0, out);
}

void DepthHead::forward(Workspace& ws, const std::array<const Tensor*, 4>& layers, int frames, int tokens_per_frame,
                        int num_special, int gh, int gw, Tensor& out, int batch) {
  LB_CHECK(batch >= 1, "depth head: batch must be >= 1, got {}", batch);
  // With a batch of 1 the scale phase reuses the streaming step's buffers
  // instead of holding several frames' worth (the CPU and the low-memory
  // profile); a last, smaller batch gets buffers of its own size.
  for (int first = 0; first < frames; first += batch) {
    const int count = std::min(batch, frames - first);
    Tensor part = out.slice(first, count);
    forward_frames(ws, layers, first, count, tokens_per_frame, num_special, gh, gw, part);
  }
}

void DepthHead::forward_frames(Workspace& ws, const std::array<const Tensor*, 4>& layers, int first, int count,
                               int tokens_per_frame, int num_special, int gh, int gw, Tensor& out) {
  const int S = count, C = 2 * config_.embed_dim, F = config_.depth_head.features;
  const int64_t np = static_cast<int64_t>(gh) * gw;
  const int H = gh * config_.patch_size, W = gw * config_.patch_size;
  const double aspect = static_cast<double>(W) / H;
  const auto& oc = config_.depth_head.out_channels;
  const DType f32 = DType::F32;

  const auto sync = [this] { be_.synchronize(); };
  // Feature pyramid: 4x, 2x, 1x and 1/2x of the patch grid, F channels each.
  std::optional<ProfileScope> stage(std::in_place, "dpt.pyramid", sync);
  std::array<Tensor*, 4> pyramid{};
  for (int i = 0; i < 4; ++i) {
    Tensor& rows = ws.get("dpt.rows", {S * np, C}, f32);
    be_.copy_rows(*layers[static_cast<size_t>(i)], rows,
                  {S, np, C, int64_t{first} * tokens_per_frame + num_special, tokens_per_frame, 0, np});
    be_.layer_norm(rows, &w_.get(kP + ".norm.weight"), &w_.get(kP + ".norm.bias"), kNormEps, rows);
    Tensor& projected = ws.get(fmt::format("dpt.proj{}", i), {S * np, oc[i]}, f32);
    be_.linear(rows, w_.get(fmt::format("{}.projects.{}.weight", kP, i)).reshape({oc[i], C}),
               &w_.get(fmt::format("{}.projects.{}.bias", kP, i)), projected);
    Tensor& maps = ws.get(fmt::format("dpt.maps{}", i), {S, oc[i], gh, gw}, f32);
    be_.tokens_to_nchw(projected, gh, gw, maps);
    be_.add_broadcast(maps, position_embedding(oc[i], gh, gw, aspect));

    Tensor* level = &maps;
    const std::string rw = fmt::format("{}.resize_layers.{}", kP, i);
    if (i == 0 || i == 1) {
      const int k = i == 0 ? 4 : 2;
      Tensor& up = ws.get(fmt::format("dpt.resized{}", i), {S, oc[i], gh * k, gw * k}, f32);
      be_.conv_transpose2d(maps, w_.get(rw + ".weight"), &w_.get(rw + ".bias"), k, up);
      level = &up;
    } else if (i == 3) {
      Tensor& down = ws.get("dpt.resized3", {S, oc[i], (gh - 1) / 2 + 1, (gw - 1) / 2 + 1}, f32);
      be_.conv2d(maps, w_.get(rw + ".weight"), &w_.get(rw + ".bias"), 2, 1, down);
      level = &down;
    }
    Tensor& rn = ws.get(fmt::format("dpt.layer{}_rn", i + 1), {S, F, level->dim(2), level->dim(3)}, f32);
    be_.conv2d(*level, w_.get(fmt::format("{}.scratch.layer{}_rn.weight", kP, i + 1)), nullptr, 1, 1, rn);
    pyramid[static_cast<size_t>(i)] = &rn;
  }

  // Coarse-to-fine fusion; each step ends at the next finer level's size.
  stage.reset();
  stage.emplace("dpt.fusion", sync);
  auto hw = [](const Tensor* t) { return std::make_pair(static_cast<int>(t->dim(2)), static_cast<int>(t->dim(3))); };
  auto [h3, w3] = hw(pyramid[2]);
  auto [h2, w2] = hw(pyramid[1]);
  auto [h1, w1] = hw(pyramid[0]);
  Tensor& f4 = ws.get("dpt.fused4", {S, F, h3, w3}, f32);
  fuse(ws, 4, *pyramid[3], nullptr, h3, w3, f4);
  Tensor& f3 = ws.get("dpt.fused3", {S, F, h2, w2}, f32);
  fuse(ws, 3, f4, pyramid[2], h2, w2, f3);
  Tensor& f2 = ws.get("dpt.fused2", {S, F, h1, w1}, f32);
  fuse(ws, 2, f3, pyramid[1], h1, w1, f2);
  // The five largest maps (the last fusion's upsampled input and output,
  // then output_conv1's result, the full-resolution map and the hidden
  // layer) share two buffers: each map is dead before the next one in its
  // buffer is written. x: resized, head1, hidden; y: f1, full (161 MB
  // instead of 281 MB at 378 x 504). Sized once for the largest of each.
  const Shape resized_shape{S, F, 2 * h1, 2 * w1}, f1_shape{S, F, 2 * h1, 2 * w1};
  const Shape head1_shape{S, F / 2, 2 * h1, 2 * w1}, full_shape{S, F / 2, H, W}, hidden_shape{S, 32, H, W};
  const int64_t x_elems = std::max({shape_numel(resized_shape), shape_numel(head1_shape), shape_numel(hidden_shape)});
  const int64_t y_elems = std::max(shape_numel(f1_shape), shape_numel(full_shape));
  Tensor& x_buffer = ws.get("dpt.tail_x", {x_elems}, f32);
  Tensor& y_buffer = ws.get("dpt.tail_y", {y_elems}, f32);
  const auto in = [](Tensor& buffer, const Shape& shape) { return buffer.slice(0, shape_numel(shape)).reshape(shape); };
  Tensor resized = in(x_buffer, resized_shape), f1 = in(y_buffer, f1_shape);
  fuse(ws, 1, f2, pyramid[0], 2 * h1, 2 * w1, f1, &resized);

  // Output convolutions at full resolution.
  stage.reset();
  stage.emplace("dpt.output", sync);
  Tensor head1 = in(x_buffer, head1_shape);
  be_.conv2d(f1, w_.get(kP + ".scratch.output_conv1.weight"), &w_.get(kP + ".scratch.output_conv1.bias"), 1, 1, head1);
  Tensor full = in(y_buffer, full_shape);
  const AxisEmbedding& embedding = position_embedding_axes(F / 2, H, W, aspect);
  be_.resize_bilinear_add_axes(head1, embedding.by_col, embedding.by_row, full);
  Tensor hidden = in(x_buffer, hidden_shape);
  be_.conv2d(full, w_.get(kP + ".scratch.output_conv2.0.weight"), &w_.get(kP + ".scratch.output_conv2.0.bias"), 1, 1,
             hidden);
  be_.relu(hidden, hidden);
  be_.conv2d(hidden, w_.get(kP + ".scratch.output_conv2.2.weight"), &w_.get(kP + ".scratch.output_conv2.2.bias"), 1, 0,
             out);
}

}  // namespace lingbot
