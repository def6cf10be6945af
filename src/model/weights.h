// The model's parameters on the compute device, by upstream state-dict name.
//
// Matrix weights of the encoder and aggregator are stored in the backend's
// compute dtype (bfloat16 on CUDA, float32 on CPU); vectors (norms, biases,
// LayerScale gains) and both heads stay float32, as upstream runs the heads
// with autocast off.
//
// LayerScale is folded into the layer before it: a transformer block's
// "x + ls1 * proj(a)" is "x + proj'(a)" with proj' = (diag(ls1) W, ls1 * b),
// and likewise ls2 into mlp.fc2. So on the device "<block>.attn.proj.weight"
// and ".bias" and "<block>.mlp.fc2.weight" and ".bias" hold the folded
// values (computed in float32 from the checkpoint, then rounded once to the
// storage dtype), and the blocks apply no gain: the residual update is then
// a plain "x += product", which the CUDA backend does in the matrix
// product's epilogue instead of a pass of its own.
//
// One copy of each parameter: a host tensor is kept only where host() is
// asked for it (tokens, embeddings and vectors) and, on the CPU, it is the
// device tensor itself when the dtypes agree. A folded or converted matrix
// keeps no host source, so its float32 checkpoint copy can go.
#pragma once

#include "backend/backend.h"
#include "checkpoint/state_dict.h"
#include "model/model_config.h"
#include "model/weight_source.h"

#include <string>
#include <unordered_map>

namespace lingbot {

// Parameters kept in another dtype (to save memory) or layout than the checkpoint's.
struct WeightStorage {
  // The camera head's matrices in bfloat16 (option camera_head_weights bf16:
  // ~0.43 GB less on the official model); its products stay float32.
  bool camera_head_bf16 = false;
  // The depth head's Conv2d weights as [Cout, k, k, Cin] instead of
  // PyTorch's [Cout, Cin, k, k], for its channels-last maps (model/depth_head.h).
  bool depth_head_channels_last = false;
  // The depth head's convolution and transposed-convolution weights in
  // bfloat16, for its bfloat16 maps (option depth_head_dtype bf16); its
  // biases and projections stay float32.
  bool depth_head_bf16 = false;
};

class DeviceWeights {
 public:
  // Checks the state dict against the config (throws a one-line summary of
  // missing / mis-shaped tensors, and of unused ones unless
  // `allow_extra_tensors`: checkpoint_check.h, require_loadable) and uploads
  // every expected tensor.
  DeviceWeights(Backend& backend, const io::StateDict& state, const ModelConfig& config,
                bool allow_extra_tensors = false, WeightStorage storage = {});
  // The same from any source, read one tensor at a time.
  DeviceWeights(Backend& backend, const WeightSource& source, const ModelConfig& config,
                bool allow_extra_tensors = false, WeightStorage storage = {});

  const Tensor& get(const std::string& name) const;
  // The LayerScale gain folded into the parameter `name` (see above), or
  // "" if none: "<block>.ls1.gamma" for "<block>.attn.proj.weight" / ".bias",
  // "<block>.ls2.gamma" for "<block>.mlp.fc2.weight" / ".bias".
  static std::string folded_gain(const std::string& name);
  const Tensor* find(const std::string& name) const;
  // A parameter as a float32 host tensor (for host-side precomputation such
  // as position-embedding interpolation). Not for a matrix weight stored in
  // another dtype than the checkpoint's, nor a folded one (their source is
  // not kept).
  Tensor host(const std::string& name) const;
  size_t device_bytes() const { return bytes_; }
  // Bytes of the host tensors kept for host() that are not a device tensor
  // themselves: what the weights cost beyond device_bytes() in host memory.
  size_t host_copy_bytes() const;

 private:
  std::unordered_map<std::string, Tensor> device_;
  std::unordered_map<std::string, Tensor> host_;  // the source tensors (views into the checkpoint)
  size_t bytes_ = 0;
};

}  // namespace lingbot
