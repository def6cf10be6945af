#include "model/weights.h"

#include "core/log.h"
#include "model/checkpoint_check.h"
#include "model/depth_head.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

namespace lingbot {

namespace {

bool stored_in_compute_dtype(const std::string& name, const Tensor& t) {
  return t.ndim() >= 2 && name.rfind("aggregator.", 0) == 0;
}

// The camera head's matrix weights (its Linear layers': 2-D ".weight"s).
bool camera_head_matrix(const std::string& name, const Tensor& t) {
  return t.ndim() == 2 && name.rfind("camera_head.", 0) == 0 && name.ends_with(".weight");
}

// src [rows, ...] (a weight) or [rows] (a bias), each row scaled by gain[row],
// in float32 (a new tensor: the source may be a view into the checkpoint).
Tensor scale_rows(const Tensor& src, const Tensor& gain, const std::string& name) {
  Tensor out = src.dtype() == DType::F32 ? src.clone() : src.to_dtype(DType::F32);
  const Tensor g = gain.to_dtype(DType::F32);
  const int64_t rows = out.dim(0);
  LB_CHECK(g.numel() == rows, "{}: LayerScale gain of {} values for {} output features", name, g.numel(), rows);
  const int64_t cols = out.numel() / rows;
  float* d = out.f32();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) d[r * cols + c] *= g.f32()[r];
  return out;
}

// The index of the first NaN or infinity in a float tensor on the CPU, or
// -1. A NaN weight would run to the end and write NaN cameras and points
// without a word; a trained checkpoint never holds one, so a file that
// does is damaged. 16-bit floats are tested on their bits (all-ones
// exponent), without converting.
int64_t first_non_finite(const Tensor& t) {
  const int64_t n = t.numel();
  int64_t first = n;
  if (t.dtype() == DType::F32) {
    const float* x = static_cast<const float*>(t.data());
#pragma omp parallel for reduction(min : first) schedule(static) if (n >= (1 << 20))
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(x[i])) first = std::min(first, i);
  } else if (t.dtype() == DType::BF16 || t.dtype() == DType::F16) {
    const uint16_t exponent = t.dtype() == DType::BF16 ? 0x7F80 : 0x7C00;
    const uint16_t* x = static_cast<const uint16_t*>(t.data());
#pragma omp parallel for reduction(min : first) schedule(static) if (n >= (1 << 20))
    for (int64_t i = 0; i < n; ++i)
      if ((x[i] & exponent) == exponent) first = std::min(first, i);
  }
  return first == n ? -1 : first;
}

}  // namespace

std::string DeviceWeights::folded_gain(const std::string& name) {
  // (layer suffix, its gain) for the two layers that end a residual branch.
  static const std::pair<std::string_view, std::string_view> kFolded[] = {{".attn.proj", ".ls1.gamma"},
                                                                          {".mlp.fc2", ".ls2.gamma"}};
  for (const std::string_view param : {".weight", ".bias"}) {
    if (!name.ends_with(param)) continue;
    const std::string_view layer = std::string_view(name).substr(0, name.size() - param.size());
    for (const auto& [suffix, gain] : kFolded) {
      if (layer.ends_with(suffix)) return std::string(layer.substr(0, layer.size() - suffix.size())).append(gain);
    }
  }
  return "";
}

DeviceWeights::DeviceWeights(Backend& backend, const io::StateDict& state, const ModelConfig& config,
                             bool allow_extra_tensors, WeightStorage storage)
    : DeviceWeights(backend, StateDictWeights(state), config, allow_extra_tensors, storage) {}

DeviceWeights::DeviceWeights(Backend& backend, const WeightSource& source, const ModelConfig& config,
                             bool allow_extra_tensors, WeightStorage storage) {
  source.require_loadable(config, allow_extra_tensors);
  for (const ExpectedTensor& e : expected_parameters(config)) {
    const Tensor src = source.tensor(e.name);
    if (const int64_t bad = first_non_finite(src); bad >= 0) {
      const float value = src.to_dtype(DType::F32).f32()[bad];
      fail("{}: tensor '{}' holds a non-finite value ({}) at element {} of {}: the checkpoint is damaged",
           source.name(), e.name, std::isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf", bad, src.describe());
    }
    const DType dtype = stored_in_compute_dtype(e.name, src)                          ? backend.compute_dtype()
                        : storage.camera_head_bf16 && camera_head_matrix(e.name, src) ? DType::BF16
                        : storage.depth_head_bf16 && is_depth_head_map_weight(e.name) ? DType::BF16
                                                                                      : DType::F32;
    const std::string gain = folded_gain(e.name);
    const bool channels_last = storage.depth_head_channels_last && is_depth_head_conv_weight(e.name);
    const Tensor& values = !gain.empty()   ? scale_rows(src, source.tensor(gain), e.name)
                           : channels_last ? channels_last_on_host(src)
                                           : src;
    // The encoder's and aggregator's Linear weights: read only by linear().
    const bool linear_weight = dtype == backend.compute_dtype() && stored_in_compute_dtype(e.name, src) &&
                               src.ndim() == 2 && e.name.ends_with(".weight");
    Tensor dev = linear_weight ? backend.upload_linear_weight(values, dtype) : backend.upload(values, dtype);
    bytes_ += dev.nbytes();
    // host() is never asked for a Linear weight (which the backend may have
    // repacked) or a matrix stored converted or folded, so none keeps its
    // source: a source that made the tensor frees it here, and a mapped
    // checkpoint gives back its pages.
    const bool converted_matrix = (dtype != src.dtype() && e.name.ends_with(".weight")) || channels_last;
    const bool keeps_host = gain.empty() && !converted_matrix && !linear_weight;
    const bool aliases_source = dev.data() == src.data();
    device_.emplace(e.name, std::move(dev));
    if (keeps_host) host_.emplace(e.name, src);
    if (!keeps_host && !aliases_source) source.done_with(e.name);
  }
#if defined(__GLIBC__)
  // The sources freed above (float32 tensors, the folding's copies) leave
  // free memory inside the heap that glibc would otherwise keep mapped.
  malloc_trim(0);
#endif
}

size_t DeviceWeights::host_copy_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : host_) {
    const auto dev = device_.find(name);
    if (dev == device_.end() || dev->second.data() != t.data()) n += t.nbytes();
  }
  return n;
}

const Tensor* DeviceWeights::find(const std::string& name) const {
  auto it = device_.find(name);
  return it == device_.end() ? nullptr : &it->second;
}

const Tensor& DeviceWeights::get(const std::string& name) const {
  const Tensor* t = find(name);
  LB_CHECK(t != nullptr, "internal error: no weight '{}'", name);
  return *t;
}

Tensor DeviceWeights::host(const std::string& name) const {
  auto it = host_.find(name);
  LB_CHECK(it != host_.end(), "internal error: no host copy of weight '{}' (matrices stored converted or folded keep none)",
           name);
  return it->second.to_dtype(DType::F32);
}

}  // namespace lingbot
