#include "model/encoder.h"

#include "model/position_embedding.h"

#include <cmath>

namespace lingbot {

namespace {
// ImageNet statistics (upstream's _RESNET_MEAN / _RESNET_STD).
constexpr std::array<float, 3> kMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kStd = {0.229f, 0.224f, 0.225f};
constexpr float kEps = 1e-6f;  // DINOv2 LayerNorms
const std::string kPrefix = "aggregator.patch_embed";
}  // namespace

Encoder::Encoder(Backend& be, const DeviceWeights& w, const ModelConfig& config) : be_(be), w_(w), config_(config) {
  const EncoderConfig& e = config.encoder;
  for (int i = 0; i < e.depth; ++i)
    blocks_.push_back(BlockWeights::bind(w, kPrefix + ".blocks." + std::to_string(i), e.embed_dim, e.num_heads,
                                         /*qk_norm=*/false, kEps));
  // cls token plus its position embedding (row 0 of pos_embed).
  const Tensor cls = w.host(kPrefix + ".cls_token");
  const Tensor pos = w.host(kPrefix + ".pos_embed");
  Tensor sum = Tensor::empty({1, e.embed_dim});
  for (int c = 0; c < e.embed_dim; ++c) sum.f32()[c] = cls.f32()[c] + pos.f32()[c];
  cls_with_pos_ = be.upload(sum, be.residual_dtype());
  if (e.num_register_tokens > 0) registers_ = be.upload(w.host(kPrefix + ".register_tokens"), be.residual_dtype());
}

void Encoder::prepare_position_embedding(int gh, int gw) {
  if (gh == grid_h_ && gw == grid_w_) return;
  const int E = config_.encoder.embed_dim;
  const Tensor pos = w_.host(kPrefix + ".pos_embed");
  const int M = static_cast<int>(std::lround(std::sqrt(static_cast<double>(pos.dim(1) - 1))));
  const Tensor patch_pos = pos.reshape({pos.dim(1), E}).slice(1, pos.dim(1) - 1);
  pos_patches_ = be_.upload(interpolate_pos_embed(patch_pos, M, gh, gw), be_.residual_dtype());
  grid_h_ = gh;
  grid_w_ = gw;
}

void Encoder::forward(Workspace& ws, const Tensor& images, Tensor& out) {
  const int S = static_cast<int>(images.dim(0));
  const int p = config_.patch_size;
  const int gh = static_cast<int>(images.dim(2)) / p, gw = static_cast<int>(images.dim(3)) / p;
  const int64_t np = static_cast<int64_t>(gh) * gw;
  const int E = config_.encoder.embed_dim;
  const int R = config_.encoder.num_register_tokens;
  const int64_t T = 1 + R + np;  // tokens per frame
  const Tensor& proj_w = w_.get(kPrefix + ".patch_embed.proj.weight");
  const DType dt = proj_w.dtype();          // matrix products
  const DType rt = be_.residual_dtype();    // the residual stream
  prepare_position_embedding(gh, gw);

  // Patch embedding: a stride-p convolution = one matrix product on patches.
  Tensor& patches = ws.get("enc.patches", {S * np, 3 * p * p}, dt);
  be_.patchify(images, p, kMean, kStd, patches);
  Tensor& embedded = ws.get("enc.embedded", {S * np, E}, dt);
  be_.linear(patches, proj_w.reshape({E, 3 * p * p}), &w_.get(kPrefix + ".patch_embed.proj.bias"), embedded);
  Tensor& embedded_r = ws.get("enc.embedded.residual", {S * np, E}, rt);
  be_.convert(embedded, embedded_r);
  be_.add_broadcast(embedded_r, pos_patches_);

  // [cls, registers, patches] per frame.
  Tensor& x = ws.get("enc.tokens", {S * T, E}, rt);
  be_.copy_rows(cls_with_pos_, x, {S, 1, E, 0, 0, 0, T});
  if (R > 0) be_.copy_rows(registers_, x, {S, R, E, 0, 0, 1, T});
  be_.copy_rows(embedded_r, x, {S, np, E, 0, np, 1 + R, T});

  const AttendFn attend = attend_within_groups(be_, S, config_.encoder.num_heads, E / config_.encoder.num_heads);
  for (const BlockWeights& b : blocks_) run_block(be_, ws, b, x, nullptr, attend, "enc.block", "encoder_block");

  // Final norm on the patch rows only (LayerNorm is per token).
  Tensor& rows = ws.get("enc.patch_rows", {S * np, E}, rt);
  be_.copy_rows(x, rows, {S, np, E, 1 + R, T, 0, np});
  be_.layer_norm(rows, &w_.get(kPrefix + ".norm.weight"), &w_.get(kPrefix + ".norm.bias"), kEps, out);
}

}  // namespace lingbot
