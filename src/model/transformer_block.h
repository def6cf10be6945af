// The pre-norm transformer block shared by the encoder, the aggregator and
// the camera head (upstream's Block / SDPABlock / CameraBlock):
//
//   x = x + ls1 * proj(attention(split(qkv(norm1(x)))))
//   x = x + ls2 * fc2(gelu(fc1(norm2(x))))
//
// with the LayerScale gains ls1 and ls2 folded into proj and fc2 when the
// weights are loaded (model/weights.h), so the residual updates here are
// plain additions of the products.
//
// What differs between users is only how q, k, v become the attention
// output (within each frame, or through a KV cache), so that part is a
// callback.
#pragma once

#include "backend/backend.h"
#include "model/weights.h"
#include "model/workspace.h"

#include <functional>
#include <string>

namespace lingbot {

struct BlockWeights {
  const Tensor* norm1_w = nullptr;
  const Tensor* norm1_b = nullptr;
  const Tensor* qkv_w = nullptr;
  const Tensor* qkv_b = nullptr;
  QkNorm qk_norm;  // pointers null when the block has no qk-norm
  bool has_qk_norm = false;
  const Tensor* proj_w = nullptr;  // ls1 folded in
  const Tensor* proj_b = nullptr;
  const Tensor* norm2_w = nullptr;
  const Tensor* norm2_b = nullptr;
  const Tensor* fc1_w = nullptr;
  const Tensor* fc1_b = nullptr;
  const Tensor* fc2_w = nullptr;  // ls2 folded in
  const Tensor* fc2_b = nullptr;
  int dim = 0;
  int num_heads = 0;
  int head_dim = 0;
  int hidden = 0;
  float norm_eps = 1e-5f;
  // The dtype of the block's activations between its products: the weights'
  // (bind sets it), except where the weights are only stored in bfloat16
  // and the block computes in float32 (the camera head, WeightStorage).
  DType activations = DType::F32;

  // Binds "<prefix>.norm1.weight" etc.
  static BlockWeights bind(const DeviceWeights& w, const std::string& prefix, int dim, int num_heads,
                           bool qk_norm, float norm_eps);
};

// q, k, v: [N, H*D] -> out [N, H*D].
using AttendFn = std::function<void(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out)>;

// Runs one block on the residual stream x [N, dim] in place. `tag` names
// the workspace buffers (blocks of the same stack may share them).
// `label` names the block's stages in the profiler (default: tag).
void run_block(Backend& be, Workspace& ws, const BlockWeights& w, Tensor& x, const RopeTable* rope,
               const AttendFn& attend, const std::string& tag, const std::string& label = "");

// An AttendFn for self-attention inside each of `groups` equal token groups.
AttendFn attend_within_groups(Backend& be, int groups, int num_heads, int head_dim);

}  // namespace lingbot
