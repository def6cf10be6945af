// The small-model parity fixtures (tests/fixtures/model_small, made by
// tools/reference/make_model_fixtures.py): paths, frames and the stream
// options of one KV-cache variant. Shared by the CPU parity tests and the
// GPU ones.
#pragma once

#include "checkpoint/checkpoint.h"
#include "model/streaming_model.h"
#include "test_support.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace lingbot::test {

inline std::string small_fixture(const std::string& name) { return fixture_path("model_small/" + name); }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// Upstream-preprocessed frames (uint8 / 255, exactly what ToTensor produced).
inline std::vector<Tensor> small_model_frames() {
  const io::StateDict inputs = io::load_state_dict(small_fixture("inputs.safetensors"));
  const Tensor u8 = inputs.at("images_u8");
  const int64_t S = u8.dim(0), plane = u8.dim(1) * u8.dim(2) * u8.dim(3);
  std::vector<Tensor> frames;
  for (int64_t i = 0; i < S; ++i) {
    Tensor f = Tensor::empty({u8.dim(1), u8.dim(2), u8.dim(3)});
    for (int64_t k = 0; k < plane; ++k) f.f32()[k] = static_cast<float>(u8.data_as<uint8_t>()[i * plane + k]) / 255.0f;
    frames.push_back(f);
  }
  return frames;
}

// The stream options a manifest variant describes (its KV flags and keyframe interval).
inline StreamOptions variant_options(const ModelConfig& config, const nlohmann::json& variant, int num_scale_frames,
                                     kv::Layout layout) {
  StreamOptions opt = StreamOptions::from_config(config);
  const auto& f = variant["kv_flags"];
  opt.cache.sliding_window = f["kv_cache_sliding_window"];
  opt.cache.scale_frames = f["kv_cache_scale_frames"];
  opt.cache.cross_frame_special = f["kv_cache_cross_frame_special"];
  opt.cache.include_scale_frames = f["kv_cache_include_scale_frames"];
  opt.cache.camera_only = f["kv_cache_camera_only"];
  opt.keyframe_interval = variant["keyframe_interval"];
  opt.num_scale_frames = num_scale_frames;
  opt.cache_layout = layout;
  opt.keep_pose_iterations = true;
  return opt;
}

// Every frame through the model, then finish(): all results in order.
inline std::vector<FrameResult> stream_all(StreamingModel& model, const std::vector<Tensor>& frames) {
  std::vector<FrameResult> results;
  for (const Tensor& frame : frames)
    for (FrameResult& r : model.push(frame)) results.push_back(std::move(r));
  for (FrameResult& r : model.finish()) results.push_back(std::move(r));
  return results;
}

}  // namespace lingbot::test
