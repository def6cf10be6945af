// The model's architecture and streaming settings, read from JSON.
//
// Key names follow upstream's constructor arguments where upstream has one
// (GCTStream / AggregatorStream); what upstream hard-codes has its own key
// (encoder, aggregator_output_layers, rope3d_*, camera_head, depth_head).
// A missing key means the official value, no file means the official model,
// and an unknown key is an error. docs/model-config.md documents every key.
// The keys are listed once, in for_each_config_key below.
#pragma once

#include "core/tensor.h"

#include <array>
#include <string>
#include <vector>

namespace lingbot {

struct EncoderConfig {  // DINOv2 ViT with registers
  int embed_dim = 1024;
  int depth = 24;
  int num_heads = 16;
  double mlp_ratio = 4.0;
  int num_register_tokens = 4;
};

struct CameraHeadConfig {  // CameraCausalHead trunk
  int dim = 2048;
  int trunk_depth = 4;
  int num_heads = 16;
  double mlp_ratio = 4.0;
};

struct DepthHeadConfig {  // DPT head
  int features = 256;
  std::array<int, 4> out_channels = {256, 512, 1024, 1024};
};

struct ModelConfig {
  // Aggregator architecture.
  int img_size = 518;  // training resolution: fixes the encoder's position-embedding grid
  int patch_size = 14;
  int embed_dim = 1024;
  int depth = 24;  // frame/global block pairs
  int num_heads = 16;
  double mlp_ratio = 4.0;
  int num_register_tokens = 4;
  bool qk_norm = true;
  double rope_freq = 100.0;  // 2D RoPE base frequency
  bool enable_3d_rope = true;
  std::vector<int> aggregator_output_layers = {4, 11, 17, 23};
  std::array<int, 3> rope3d_fhw_dim = {20, 22, 22};
  double rope3d_theta = 10000.0;

  // Streaming and KV cache.
  int kv_cache_sliding_window = 64;
  int kv_cache_scale_frames = 8;
  bool kv_cache_cross_frame_special = true;
  bool kv_cache_include_scale_frames = true;
  bool kv_cache_camera_only = false;
  int camera_num_iterations = 4;
  int num_scale_frames = 8;

  EncoderConfig encoder;
  CameraHeadConfig camera_head;
  DepthHeadConfig depth_head;

  // Derived sizes.
  int head_dim() const { return embed_dim / num_heads; }
  int num_special_tokens() const { return 1 + num_register_tokens + 1; }  // camera, registers, scale

  // The official LingBot-Map architecture (what no config file means).
  static ModelConfig official() { return {}; }
  // Parse a JSON document; `source` names it in error messages.
  static ModelConfig from_json_text(const std::string& text, const std::string& source);
  static ModelConfig from_file(const std::string& path);
  std::string to_json() const;  // every key, resolved

  // Throws with a one-line message if the sizes cannot describe a model.
  void validate(const std::string& source) const;
};

// Every key of the config file, once: reading (from_json_text), writing
// (to_json) and the check that docs/model-config.md lists each key with its
// official value go through this list. Calls visit(key, field) for each key
// in file order, `field` being the ModelConfig member (int, double, bool,
// std::vector<int> or std::array<int, N>); "object.key" is `key` inside the
// JSON object `object`. Config is ModelConfig or const ModelConfig.
template <typename Config, typename Visit>
void for_each_config_key(Config& c, Visit&& visit) {
  visit("img_size", c.img_size);
  visit("patch_size", c.patch_size);
  visit("embed_dim", c.embed_dim);
  visit("depth", c.depth);
  visit("num_heads", c.num_heads);
  visit("mlp_ratio", c.mlp_ratio);
  visit("num_register_tokens", c.num_register_tokens);
  visit("qk_norm", c.qk_norm);
  visit("rope_freq", c.rope_freq);
  visit("enable_3d_rope", c.enable_3d_rope);
  visit("aggregator_output_layers", c.aggregator_output_layers);
  visit("rope3d_fhw_dim", c.rope3d_fhw_dim);
  visit("rope3d_theta", c.rope3d_theta);
  visit("kv_cache_sliding_window", c.kv_cache_sliding_window);
  visit("kv_cache_scale_frames", c.kv_cache_scale_frames);
  visit("kv_cache_cross_frame_special", c.kv_cache_cross_frame_special);
  visit("kv_cache_include_scale_frames", c.kv_cache_include_scale_frames);
  visit("kv_cache_camera_only", c.kv_cache_camera_only);
  visit("camera_num_iterations", c.camera_num_iterations);
  visit("num_scale_frames", c.num_scale_frames);
  visit("encoder.embed_dim", c.encoder.embed_dim);
  visit("encoder.depth", c.encoder.depth);
  visit("encoder.num_heads", c.encoder.num_heads);
  visit("encoder.mlp_ratio", c.encoder.mlp_ratio);
  visit("encoder.num_register_tokens", c.encoder.num_register_tokens);
  visit("camera_head.dim", c.camera_head.dim);
  visit("camera_head.trunk_depth", c.camera_head.trunk_depth);
  visit("camera_head.num_heads", c.camera_head.num_heads);
  visit("camera_head.mlp_ratio", c.camera_head.mlp_ratio);
  visit("depth_head.features", c.depth_head.features);
  visit("depth_head.out_channels", c.depth_head.out_channels);
}

// Keys of upstream's configs that are accepted and ignored. max_frame_num
// sizes upstream's 3D RoPE table; this engine computes positions for any
// frame index, so it has no such limit.
inline constexpr std::array<const char*, 1> kIgnoredConfigKeys = {"max_frame_num"};

// The parameters a checkpoint must hold for a config: upstream's state-dict
// names and shapes, grouped by module.
struct ExpectedTensor {
  std::string name;
  Shape shape;
};
std::vector<ExpectedTensor> expected_parameters(const ModelConfig& config);

}  // namespace lingbot
