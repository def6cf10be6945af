// The viewer's wire format: what the server sends a page, one binary message
// per event, so a page never parses JSON arrays of floats. A stream is a
// sequence of messages, each a little-endian uint32 byte count then that many
// bytes; every message starts with a 4-byte header whose first byte is its
// MessageType. All fields are little-endian, arrays start at offsets that are
// multiples of 4 (so a page can view them as typed arrays).
//
//   Scene     (first message of every stream)
//     u32 version, i32 width, i32 height, i32 stride (pixels between points),
//     i32 expected frames (-1: unknown), i32 initial confidence level, u32 session
//   Frame     (one per finished frame; 128-byte header, then the arrays)
//     i32 index, f32 camera_to_world[12] (row-major 3x4, OpenCV axes), f32 K[9],
//     f32 timestamp, u32 points N, f32 origin[3], f32 extent[3], u16 thumb w, u16 thumb h,
//     u16 position[3N]   (origin + q / 65535 * extent, per axis), padded to 4
//     u8  rgb[3N], u8 confidence level[N], u8 grid level[N], padded to 4
//     u8  thumbnail rgb[3 w h] (the frame, subsampled), padded to 4
//   End       (the run has finished) i32 frames
//   Heartbeat (nothing; sent while idle, so a closed page's connection is noticed)
//
// Confidence travels as a level k in 0..255: the largest k with
// confidence > confidence_of_level(k) = 2^(k/32). So "confidence > t_k" is
// exactly "level >= k", and a page's threshold slider needs no float.
// Points with confidence <= 1 (level 0's threshold) are not sent.
// The grid level of a point is how coarse a subsampling keeps it: the
// largest L <= 4 with both grid coordinates (pixel / stride) divisible by
// 2^L, so "downsample by 2^D" is "grid level >= D".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace lingbot::viewer {

enum class MessageType : uint8_t { Heartbeat = 0, Scene = 1, Frame = 2, End = 3 };

constexpr uint32_t kWireVersion = 1;
constexpr int kConfidenceLevels = 256;
constexpr int kMaxGridLevel = 4;
constexpr int kThumbnailMaxWidth = 192;  // the page keeps one per frame
constexpr size_t kFrameHeaderBytes = 128;

float confidence_of_level(int level);  // 2^(level/32) as float
// -1 for confidence <= 1 (or not a number); else the level defined above.
int confidence_level(float confidence);
// The level whose threshold is nearest `confidence` (a slider's starting place).
int nearest_confidence_level(double confidence);
int grid_level(int grid_x, int grid_y);

struct SceneInfo {
  int width = 0, height = 0;  // the frames the model saw
  int stride = 1;             // every stride-th pixel in x and y becomes a point
  int expected_frames = -1;
  double initial_conf_threshold = 1.5;
  uint32_t session = 0;  // tells a reconnecting page whether it is the same run
};

// One finished frame as the viewer takes it: views of the result's tensors
// (not copies; the model allocates them afresh for every frame).
struct FrameInput {
  int64_t index = 0;
  double timestamp = 0;
  std::array<std::array<double, 4>, 3> camera_to_world{};
  std::array<std::array<double, 3>, 3> intrinsic{};
  Tensor world_points;  // [H,W,3] float32, or undefined (a --no-dense run: camera only)
  Tensor depth_conf;    // [H,W] float32
  Tensor image;         // [3,H,W] float32 in [0,1]
};

std::string encode_scene(const SceneInfo& scene);
std::string encode_frame(const FrameInput& frame, int stride);
std::string encode_end(int frames);
std::string encode_heartbeat();

// A Frame message read back (the server's GLB download, and the tests).
struct DecodedPoint {
  float xyz[3];
  uint8_t rgb[3];
  uint8_t confidence_level;
  uint8_t grid_level;
};
struct DecodedFrame {
  int index = 0;
  std::array<float, 12> camera_to_world{};
  std::array<float, 9> intrinsic{};
  float timestamp = 0;
  std::vector<DecodedPoint> points;
  int thumb_width = 0, thumb_height = 0;
};
// Throws lingbot::Error when `message` is not a well-formed Frame message.
DecodedFrame decode_frame(std::string_view message);
MessageType message_type(std::string_view message);

}  // namespace lingbot::viewer
