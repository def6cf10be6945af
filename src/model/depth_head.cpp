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

Tensor channels_last_on_host(const Tensor& t) {
  LB_CHECK(t.ndim() == 4 && t.is_cpu(), "internal error: {} is not a 4-D host tensor", t.describe());
  const Tensor src = t.to_dtype(DType::F32);
  const int64_t A = src.dim(0), B = src.dim(1), P = src.dim(2) * src.dim(3);
  Tensor out = Tensor::empty({A, src.dim(2), src.dim(3), B});
  const float* s = src.f32();
  float* d = out.f32();
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < P; ++p) d[(a * P + p) * B + b] = s[(a * B + b) * P + p];
  return out;
}

bool is_depth_head_conv_weight(std::string_view name) {
  if (!name.starts_with("depth_head.") || !name.ends_with(".weight")) return false;
  // resize_layers.3 is a strided Conv2d; .0 and .1 are ConvTranspose2d.
  if (name == "depth_head.resize_layers.3.weight") return true;
  return name.starts_with("depth_head.scratch.");
}

bool is_depth_head_map_weight(std::string_view name) {
  return is_depth_head_conv_weight(name) || name == "depth_head.resize_layers.0.weight" ||
         name == "depth_head.resize_layers.1.weight";
}

DepthHead::DepthHead(Backend& be, const DeviceWeights& w, const ModelConfig& config, MapLayout layout, DType maps)
    : be_(be), w_(w), config_(config), layout_(layout), maps_(maps) {
  LB_CHECK(maps == DType::F32 || (maps == DType::BF16 && layout == MapLayout::ChannelsLast),
           "internal error: the depth head's {} maps need channels last", dtype_name(maps));
}

Shape DepthHead::map_shape(int64_t n, int64_t c, int64_t h, int64_t w) const {
  return layout_ == MapLayout::ChannelsFirst ? Shape{n, c, h, w} : Shape{n, h, w, c};
}
int64_t DepthHead::map_height(const Tensor& t) const { return t.dim(layout_ == MapLayout::ChannelsFirst ? 2 : 1); }
int64_t DepthHead::map_width(const Tensor& t) const { return t.dim(layout_ == MapLayout::ChannelsFirst ? 3 : 2); }

const Tensor& DepthHead::position_embedding(int channels, int h, int w, double aspect) {
  const std::array<int, 3> key = {channels, h, w};
  auto it = pos_embed_.find(key);
  if (it == pos_embed_.end()) {
    const Tensor chw = dpt_pos_embed(channels, h, w, aspect);
    // Channels last: [h, w, C], one frame's map, which add_broadcast repeats.
    const Tensor host = layout_ == MapLayout::ChannelsFirst
                            ? chw
                            : channels_last_on_host(chw.reshape({1, channels, h, w})).reshape({h, w, channels});
    it = pos_embed_.emplace(key, be_.upload(host, DType::F32)).first;
  }
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

void DepthHead::conv(const Tensor& x, const std::string& layer, bool bias, int stride, int pad, Tensor& out,
                     const ConvEpilogue& epilogue) {
  const Tensor& weight = w_.get(layer + ".weight");
  const Tensor* b = bias ? &w_.get(layer + ".bias") : nullptr;
  // Within the dpt.* stages: the convolutions' share, apart from the
  // projections, resizes and element-wise passes around them.
  ProfileScope p(weight.dim(2) == 1 ? "dpt.conv 1x1" : "dpt.conv 3x3", [this] { be_.synchronize(); });
  if (layout_ == MapLayout::ChannelsLast) {
    be_.conv2d_nhwc(x, weight, b, stride, pad, out, epilogue);
    return;
  }
  be_.conv2d(x, weight, b, stride, pad, out);
  if (epilogue.residual != nullptr) be_.add(out, *epilogue.residual, out);
  if (epilogue.act == Activation::Relu) be_.relu(out, out);
}

void DepthHead::residual_unit(Workspace& ws, const std::string& prefix, Tensor& x, Tensor& out) {
  Tensor& mid = ws.get("dpt.rcu_mid", x.shape(), maps_);
  be_.relu(x, x);  // in place, as upstream's nn.ReLU(inplace=True): the skip below adds relu(x)
  conv(x, prefix + ".conv1", true, 1, 1, mid, {.act = Activation::Relu});
  conv(mid, prefix + ".conv2", true, 1, 1, out, {.residual = &x});
}

void DepthHead::fuse(Workspace& ws, int index, Tensor& x, Tensor* skip, int h, int w, Tensor& out,
                     Tensor* resized_into) {
  const std::string p = fmt::format("{}.scratch.refinenet{}", kP, index);
  const Shape& s = x.shape();
  Tensor& sum = ws.get(fmt::format("dpt.fuse{}.sum", index), s, maps_);
  if (skip != nullptr) {
    Tensor& res = ws.get(fmt::format("dpt.fuse{}.res", index), s, maps_);
    residual_unit(ws, p + ".resConfUnit1", *skip, res);
    be_.add(x, res, sum);
  } else {
    be_.copy_rows(x, sum, {1, x.numel(), 1, 0, 0, 0, 0});
  }
  Tensor& unit = ws.get(fmt::format("dpt.fuse{}.unit", index), s, maps_);
  residual_unit(ws, p + ".resConfUnit2", sum, unit);
  const bool first = layout_ == MapLayout::ChannelsFirst;
  Tensor& resized = resized_into != nullptr
                        ? *resized_into
                        : ws.get(fmt::format("dpt.fuse{}.resized", index), map_shape(s[0], s[first ? 1 : 3], h, w),
                                 maps_);
  if (first) {
    be_.resize_bilinear(unit, resized);
  } else {
    be_.resize_bilinear_nhwc(unit, nullptr, resized);
  }
  conv(resized, p + ".out_conv", true, 1, 0, out);
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
  const bool channels_first = layout_ == MapLayout::ChannelsFirst;

  const auto sync = [this] { be_.synchronize(); };
  // Feature pyramid: 4x, 2x, 1x and 1/2x of the patch grid, F channels each.
  std::optional<ProfileScope> stage(std::in_place, "dpt.pyramid", sync);
  std::array<Tensor*, 4> pyramid{};
  for (int i = 0; i < 4; ++i) {
    std::optional<ProfileScope> part(std::in_place, "dpt.projections", sync);
    Tensor& rows = ws.get("dpt.rows", {S * np, C}, f32);
    be_.copy_rows(*layers[static_cast<size_t>(i)], rows,
                  {S, np, C, int64_t{first} * tokens_per_frame + num_special, tokens_per_frame, 0, np});
    be_.layer_norm(rows, &w_.get(kP + ".norm.weight"), &w_.get(kP + ".norm.bias"), kNormEps, rows);
    Tensor& projected = ws.get(fmt::format("dpt.proj{}", i), {S * np, oc[i]}, f32);
    be_.linear(rows, w_.get(fmt::format("{}.projects.{}.weight", kP, i)).reshape({oc[i], C}),
               &w_.get(fmt::format("{}.projects.{}.bias", kP, i)), projected);
    // The projected tokens are the frames' maps channels last as they stand.
    Tensor maps = channels_first ? ws.get(fmt::format("dpt.maps{}", i), {S, oc[i], gh, gw}, f32)
                                 : projected.reshape({S, gh, gw, oc[i]});
    if (channels_first) be_.tokens_to_nchw(projected, gh, gw, maps);
    be_.add_broadcast(maps, position_embedding(oc[i], gh, gw, aspect));
    // bfloat16 maps from here on: the projection and its position term
    // stay float32 (a small map), rounded once.
    if (maps_ != f32) {
      Tensor& rounded = ws.get(fmt::format("dpt.maps{}", i), maps.shape(), maps_);
      be_.convert(maps, rounded);
      maps = rounded;
    }

    part.reset();
    const Tensor* level = &maps;
    const std::string rw = fmt::format("{}.resize_layers.{}", kP, i);
    if (i == 0 || i == 1) {
      ProfileScope transposed("dpt.conv_transpose", sync);
      const int k = i == 0 ? 4 : 2;
      Tensor& up = ws.get(fmt::format("dpt.resized{}", i), map_shape(S, oc[i], gh * k, gw * k), maps_);
      if (channels_first) {
        be_.conv_transpose2d(maps, w_.get(rw + ".weight"), &w_.get(rw + ".bias"), k, up);
      } else {
        be_.conv_transpose2d_nhwc(maps, w_.get(rw + ".weight"), &w_.get(rw + ".bias"), k, up);
      }
      level = &up;
    } else if (i == 3) {
      Tensor& down = ws.get("dpt.resized3", map_shape(S, oc[i], (gh - 1) / 2 + 1, (gw - 1) / 2 + 1), maps_);
      conv(maps, rw, true, 2, 1, down);
      level = &down;
    }
    Tensor& rn =
        ws.get(fmt::format("dpt.layer{}_rn", i + 1), map_shape(S, F, map_height(*level), map_width(*level)), maps_);
    conv(*level, fmt::format("{}.scratch.layer{}_rn", kP, i + 1), false, 1, 1, rn);
    pyramid[static_cast<size_t>(i)] = &rn;
  }

  // Coarse-to-fine fusion; each step ends at the next finer level's size.
  stage.reset();
  stage.emplace("dpt.fusion", sync);
  auto hw = [this](const Tensor* t) {
    return std::make_pair(static_cast<int>(map_height(*t)), static_cast<int>(map_width(*t)));
  };
  auto [h3, w3] = hw(pyramid[2]);
  auto [h2, w2] = hw(pyramid[1]);
  auto [h1, w1] = hw(pyramid[0]);
  Tensor& f4 = ws.get("dpt.fused4", map_shape(S, F, h3, w3), maps_);
  fuse(ws, 4, *pyramid[3], nullptr, h3, w3, f4);
  Tensor& f3 = ws.get("dpt.fused3", map_shape(S, F, h2, w2), maps_);
  fuse(ws, 3, f4, pyramid[2], h2, w2, f3);
  Tensor& f2 = ws.get("dpt.fused2", map_shape(S, F, h1, w1), maps_);
  fuse(ws, 2, f3, pyramid[1], h1, w1, f2);
  // The five largest maps (the last fusion's upsampled input and output,
  // then output_conv1's result, the full-resolution map and the hidden
  // layer) share two buffers: each map is dead before the next one in its
  // buffer is written. x: resized, head1, hidden; y: f1, full (161 MB
  // instead of 281 MB at 378 x 504), and channels last the two-channel
  // output before its move to [S, 2, H, W]. Sized once for the largest of each.
  const Shape resized_shape = map_shape(S, F, 2 * h1, 2 * w1), f1_shape = map_shape(S, F, 2 * h1, 2 * w1);
  const Shape head1_shape = map_shape(S, F / 2, 2 * h1, 2 * w1), full_shape = map_shape(S, F / 2, H, W);
  const Shape hidden_shape = map_shape(S, 32, H, W);
  const int64_t x_elems = std::max({shape_numel(resized_shape), shape_numel(head1_shape), shape_numel(hidden_shape)});
  const int64_t y_elems = std::max(shape_numel(f1_shape), shape_numel(full_shape));
  Tensor& x_buffer = ws.get("dpt.tail_x", {x_elems}, maps_);
  Tensor& y_buffer = ws.get("dpt.tail_y", {y_elems}, maps_);
  const auto in = [](Tensor& buffer, const Shape& shape) { return buffer.slice(0, shape_numel(shape)).reshape(shape); };
  Tensor resized = in(x_buffer, resized_shape), f1 = in(y_buffer, f1_shape);
  fuse(ws, 1, f2, pyramid[0], 2 * h1, 2 * w1, f1, &resized);

  // Output convolutions at full resolution.
  stage.reset();
  stage.emplace("dpt.output", sync);
  const std::string scratch = kP + ".scratch";
  Tensor head1 = in(x_buffer, head1_shape);
  conv(f1, scratch + ".output_conv1", true, 1, 1, head1);
  Tensor full = in(y_buffer, full_shape);
  const AxisEmbedding& embedding = position_embedding_axes(F / 2, H, W, aspect);
  if (channels_first) {
    be_.resize_bilinear_add_axes(head1, embedding.by_col, embedding.by_row, full);
  } else {
    be_.resize_bilinear_add_axes_nhwc(head1, embedding.by_col, embedding.by_row, full);
  }
  Tensor hidden = in(x_buffer, hidden_shape);
  conv(full, scratch + ".output_conv2.0", true, 1, 1, hidden, {.act = Activation::Relu});
  if (channels_first) {
    conv(hidden, scratch + ".output_conv2.2", true, 1, 0, out);
    return;
  }
  // Channels last: the two channels per pixel, then moved to out's [S, 2, H, W]
  // (float32: bfloat16 maps are widened first).
  Tensor pixels = in(y_buffer, map_shape(S, 2, H, W));
  conv(hidden, scratch + ".output_conv2.2", true, 1, 0, pixels);
  if (maps_ != f32) {
    Tensor& widened = ws.get("dpt.pixels", pixels.shape(), f32);
    be_.convert(pixels, widened);
    pixels = widened;
  }
  be_.tokens_to_nchw(pixels, H, W, out);
}

}  // namespace lingbot
