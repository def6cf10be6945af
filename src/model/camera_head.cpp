#include "model/camera_head.h"

#include <fmt/format.h>

namespace lingbot {

namespace {
constexpr float kNormEps = 1e-5f;   // token_norm, trunk_norm and the trunk blocks
constexpr float kAdaLnEps = 1e-6f;  // adaln_norm (no affine)
}  // namespace

CameraHead::CameraHead(Backend& be, const DeviceWeights& w, const ModelConfig& config, int iterations)
    : be_(be), w_(w), config_(config.camera_head), iterations_(iterations) {
  for (int i = 0; i < config_.trunk_depth; ++i) {
    trunk_.push_back(BlockWeights::bind(w, fmt::format("camera_head.trunk.{}", i), config_.dim, config_.num_heads,
                                        /*qk_norm=*/false, kNormEps));
    // Float32 as upstream's (autocast off), also where the matrices are
    // kept in bfloat16 (WeightStorage::camera_head_bf16).
    trunk_.back().activations = DType::F32;
  }
  // One camera token per frame; upstream never evicts single-token frames,
  // so these caches keep every stored frame's token.
  const kv::TokenLayout tokens{0, 1, config_.num_heads, config_.dim / config_.num_heads};
  cache_ = be.make_kv_cache(kv::Layout::Dense, kv::CacheConfig{}, tokens, iterations_ * config_.trunk_depth);
}

void CameraHead::reset() { cache_->reset(); }

void CameraHead::prepare(int frames, bool store) {
  cache_->begin_step(frames, store);
  step_frames_ = frames;
}

void CameraHead::finish() { cache_->end_step(); }

void CameraHead::compute(Workspace& ws, const Tensor& tokens, int tokens_per_frame, Tensor& poses) {
  const int S = step_frames_, C = config_.dim, H = config_.num_heads, D = C / H;
  const DType f32 = DType::F32;
  // Camera token of each frame: row 0 of every frame.
  Tensor& cam = ws.get("cam.tokens", {S, C}, f32);
  be_.copy_rows(tokens, cam, {S, 1, C, 0, tokens_per_frame, 0, 1});
  be_.layer_norm(cam, &w_.get("camera_head.token_norm.weight"), &w_.get("camera_head.token_norm.bias"), kNormEps,
                 cam);
  Tensor& normed = ws.get("cam.adaln", {S, C}, f32);
  be_.layer_norm(cam, nullptr, nullptr, kAdaLnEps, normed);  // the same for every iteration

  Tensor& pose_in = ws.get("cam.pose_in", {S, 9}, f32);       // previous raw pose, or the empty pose
  Tensor& pose_raw = ws.get("cam.pose_raw", {S, 9}, f32);     // accumulated, before activation
  Tensor& embedded = ws.get("cam.embedded", {S, C}, f32);
  Tensor& modulation = ws.get("cam.modulation", {S, 3 * C}, f32);
  Tensor& x = ws.get("cam.x", {S, C}, f32);
  Tensor& trunk_out = ws.get("cam.trunk_norm", {S, C}, f32);
  Tensor& branch = ws.get("cam.branch", {S, C / 2}, f32);
  Tensor& delta = ws.get("cam.delta", {S, 9}, f32);

  be_.copy_rows(w_.get("camera_head.empty_pose_tokens"), pose_in, {S, 1, 9, 0, 0, 0, 1});
  int block_index = 0;
  const AttendFn through_cache = [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    cache_->append(block_index, k.reshape({S, H, D}), v.reshape({S, H, D}));
    Tensor out3 = out.reshape({S, H, D});
    cache_->attend(block_index, q.reshape({S, H, D}), out3);
  };
  for (int it = 0; it < iterations_; ++it) {
    be_.linear(pose_in, w_.get("camera_head.embed_pose.weight"), &w_.get("camera_head.embed_pose.bias"), embedded);
    be_.silu(embedded, embedded);
    be_.linear(embedded, w_.get("camera_head.poseLN_modulation.1.weight"),
               &w_.get("camera_head.poseLN_modulation.1.bias"), modulation);
    be_.adaln_modulate(normed, modulation, cam, x);
    for (int b = 0; b < config_.trunk_depth; ++b) {
      block_index = it * config_.trunk_depth + b;
      run_block(be_, ws, trunk_[static_cast<size_t>(b)], x, nullptr, through_cache, "cam.block");
    }
    be_.layer_norm(x, &w_.get("camera_head.trunk_norm.weight"), &w_.get("camera_head.trunk_norm.bias"), kNormEps,
                   trunk_out);
    be_.linear(trunk_out, w_.get("camera_head.pose_branch.fc1.weight"), &w_.get("camera_head.pose_branch.fc1.bias"),
               branch, Activation::Gelu);
    be_.linear(branch, w_.get("camera_head.pose_branch.fc2.weight"), &w_.get("camera_head.pose_branch.fc2.bias"),
               delta);
    if (it == 0) {
      be_.copy_rows(delta, pose_raw, {1, S, 9, 0, 0, 0, 0});
    } else {
      be_.add(pose_raw, delta, pose_raw);
    }
    // Output of this iteration: translation and quaternion as they are, field of view through a ReLU.
    Tensor out = poses.slice(it, 1).reshape({S, 9});
    be_.copy_rows(pose_raw, out, {1, S, 9, 0, 0, 0, 0});
    Tensor& fov = ws.get("cam.fov", {S, 2}, f32);
    be_.copy_rows(pose_raw, fov, {S, 2, 1, 7, 9, 0, 2});  // columns 7, 8 of each row, seen as 1-element rows
    be_.relu(fov, fov);
    be_.copy_rows(fov, out, {S, 2, 1, 0, 2, 7, 9});
    be_.copy_rows(pose_raw, pose_in, {1, S, 9, 0, 0, 0, 0});
  }
}

}  // namespace lingbot
