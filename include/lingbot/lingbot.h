// lingbot-map.cpp: the library's public API. Include this header (it brings
// <lingbot/options.h> and <lingbot/error.h> with it) and link the CMake
// target lingbot::lingbot; nothing else of the engine is needed.
//
//   lingbot::Options options;                       // every option: lingbot/options.h
//   options.device = "cuda";
//   lingbot::Model model("lingbot-map-long.pt", "", options);
//   lingbot::Stream stream = model.open_stream();
//   for (const std::string& path : lingbot::list_images("frames/"))
//     for (const lingbot::FrameOutput& r : stream.push_file(path)) use(r);
//   for (const lingbot::FrameOutput& r : stream.finish()) use(r);  // the rest
//
// A stream is one video, streamed as upstream GCTStream.inference_streaming
// does (Options::mode streaming; windowed runs upstream's inference_windowed,
// window by window, and its results trail further: a window's frames come
// once the window is aligned, see src/model/windowed_stream.h): the first num_scale_frames frames are held until the last of them
// arrives and then run together (they attend to each other); every later
// frame runs alone against the KV cache. So a push() returns the results
// that became ready, in frame order: none while the scale phase fills, then
// that whole phase at once (from the push of its last frame), then one
// frame per push, pipeline_depth pushes late. finish() runs what is held and returns every result not yet
// returned; every frame's result is returned exactly once.
//
// Conventions (upstream's; src/model/camera_geometry.h):
//   * Cameras use OpenCV axes: x right, y down, z forward.
//   * camera_to_world is the pose [R | t] mapping camera coordinates to
//     world coordinates, as upstream demo.py's postprocess() writes
//     "extrinsic"; the camera centre is its last column. The world frame is
//     the one the model predicts every pose of the stream in.
//   * The intrinsic is a pinhole in pixels of the preprocessed frame, with
//     the principal point at the frame's centre (width / 2, height / 2).
//   * Lengths (translations, depth, points) are in the model's own units,
//     known only up to scale.
//   * Pixel (x, y) of a [H, W] map is element y * W + x; its world point is
//     camera_to_world * (K^-1 [x, y, 1] * depth), integer x and y.
//
// Errors: every function throws lingbot::Error, with a one-line message
// naming the file, option or argument at fault, for anything a caller can
// cause; std::bad_alloc when memory runs out. After an error in push() a
// stream should be reset().
//
// Threads: a Model and its Streams share one device; use them from one
// thread at a time.
#pragma once

#include <lingbot/error.h>
#include <lingbot/options.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lingbot {

// The library's version, "MAJOR.MINOR.PATCH".
const char* version();

// Sets an option by its name in LINGBOT_OPTIONS, from text: an integer, for
// a boolean true/false (or 1/0, on/off, yes/no), for a choice one of the
// choices. Throws Error for an unknown name or a value of the wrong form
// (the range is checked when a Model is made with the options).
void set_option(Options& options, std::string_view name, std::string_view value);

// The .png / .jpg / .jpeg files directly in `folder` (any letter case,
// hidden files skipped), sorted by path as upstream's sorted(glob) sorts
// them. Throws Error if the folder is missing or holds no image.
std::vector<std::string> list_images(const std::string& folder);

// Wall time per stage of the model (off by default; timing synchronises the
// device at every stage, so a run is slower with it on).
void set_profiling(bool on);
std::string profiling_report();  // one line per stage, slowest first

// What the model gives for one frame.
struct FrameOutput {
  int64_t index = 0;     // position in the stream, from 0
  bool keyframe = true;  // stored in the KV cache (see keyframe_interval)
  int frame_type = 0;    // upstream's: 0 a scale frame, 1 a keyframe, 2 a non-keyframe (of its window, windowed)
  // Upstream's pose encoding: translation tx, ty, tz and quaternion qx, qy,
  // qz, qw of the world-to-camera pose, then the vertical and horizontal
  // fields of view in radians.
  std::array<float, 9> pose_enc{};
  std::array<std::array<double, 4>, 3> camera_to_world{};  // [R | t], row-major (see the conventions above)
  std::array<std::array<double, 3>, 3> intrinsic{};        // [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]
  int height = 0, width = 0;  // of the preprocessed frame, which the maps below cover
  // Per pixel, row-major; empty when Options::dense is false.
  std::vector<float> depth;         // [H * W]: distance along the camera's z axis
  std::vector<float> confidence;    // [H * W]: >= 1, larger is surer (upstream's depth_conf)
  std::vector<float> world_points;  // [H * W * 3]: x, y, z of each pixel in world coordinates

  // The camera's position in world coordinates (camera_to_world's last column).
  std::array<double, 3> camera_centre() const {
    return {camera_to_world[0][3], camera_to_world[1][3], camera_to_world[2][3]};
  }
};

class Model;

// One video at a time through a model. Frames of a stream must all have
// the same size after preprocessing; reset() starts a new video, of any size.
class Stream {
 public:
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  ~Stream();

  // An image file (PNG or JPEG, EXIF orientation applied), decoded and
  // preprocessed exactly as `lingbot-map run` and upstream do (Options::mode,
  // image_size).
  std::vector<FrameOutput> push_file(const std::string& path);
  // 8-bit RGB pixels, row-major and interleaved (pixel (x, y) channel c at
  // rgb[(y * width + x) * 3 + c]), rgb.size() == width * height * 3;
  // preprocessed like push_file's.
  std::vector<FrameOutput> push_rgb(std::span<const uint8_t> rgb, int width, int height);
  // A frame already preprocessed: float32 planes [3, height, width] (R, G,
  // B) in [0, 1], chw.size() == 3 * height * width, height and width
  // multiples of the model's patch size (14). Goes in as it is.
  std::vector<FrameOutput> push_preprocessed(std::span<const float> chw, int width, int height);

  // Runs any held frames and returns every result not yet returned.
  std::vector<FrameOutput> finish();
  // Forgets the video (results not yet returned are dropped): the next push
  // starts a new one.
  void reset();
  int64_t frames_pushed() const;  // since the stream was opened or reset

 private:
  friend class Model;
  struct Impl;
  explicit Stream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Model {
 public:
  // Loads a checkpoint (torch.save .pt as published, or .safetensors;
  // memory-mapped) and the architecture from `config_path` (JSON,
  // docs/model-config.md; empty: the official LingBot-Map model), checks
  // that they fit, checks `options` and sets up the device.
  explicit Model(const std::string& checkpoint, const std::string& config_path = "", const Options& options = {});
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // A new stream. Each stream holds its own copy of the weights on the
  // device and its own KV cache; the model may be destroyed before it.
  Stream open_stream() const;

  const Options& options() const;
  std::string device_name() const;  // the backend the model runs on, e.g. "cpu (16 threads)"
  int patch_size() const;           // frame sizes for push_preprocessed are multiples of it

 private:
  friend class Stream;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace lingbot
