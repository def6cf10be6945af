#include "model/stream_options.h"

namespace lingbot {

StreamOptions StreamOptions::from_config(const ModelConfig& c) {
  StreamOptions o;
  o.cache.sliding_window = c.kv_cache_sliding_window;
  o.cache.scale_frames = c.kv_cache_scale_frames;
  o.cache.cross_frame_special = c.kv_cache_cross_frame_special;
  o.cache.include_scale_frames = c.kv_cache_include_scale_frames;
  o.cache.camera_only = c.kv_cache_camera_only;
  o.num_scale_frames = c.num_scale_frames;
  o.camera_iterations = c.camera_num_iterations;
  return o;
}

}  // namespace lingbot
