#include "viewer/frame_packet.h"

#include "core/error.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace lingbot::viewer {

static_assert(std::endian::native == std::endian::little, "the wire format is written as the host's bytes");

float confidence_of_level(int level) { return static_cast<float>(std::exp2(level / 32.0)); }

int confidence_level(float c) {
  if (!(c > confidence_of_level(0))) return -1;
  // A first guess from the logarithm, then settled against the exact
  // thresholds, so "c > confidence_of_level(k)" and "level >= k" agree.
  int k = std::clamp(static_cast<int>(std::floor(std::log2(static_cast<double>(c)) * 32.0)), 0, kConfidenceLevels - 1);
  while (k + 1 < kConfidenceLevels && c > confidence_of_level(k + 1)) ++k;
  while (k > 0 && !(c > confidence_of_level(k))) --k;
  return k;
}

int nearest_confidence_level(double c) {
  if (!(c > 1)) return 0;
  return std::clamp(static_cast<int>(std::lround(std::log2(c) * 32.0)), 0, kConfidenceLevels - 1);
}

int grid_level(int gx, int gy) {
  return std::min(kMaxGridLevel, std::countr_zero(static_cast<unsigned>(gx | gy | (1 << kMaxGridLevel))));
}

namespace {

// Appends plain values to a byte string.
class Writer {
 public:
  template <typename T> void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void put_bytes(const void* data, size_t n) { bytes_.append(static_cast<const char*>(data), n); }
  void pad_to_4() { bytes_.resize((bytes_.size() + 3) / 4 * 4, '\0'); }
  void header(MessageType type) {
    put(static_cast<uint8_t>(type));
    put_bytes("\0\0\0", 3);
  }
  size_t size() const { return bytes_.size(); }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

// Reads them back, checking every access against the message's length.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T> T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  const char* take(size_t n) {
    LB_CHECK(n <= bytes_.size() - at_, "viewer frame message: truncated at byte {} (wants {} more of {})", at_, n,
             bytes_.size());
    const char* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  void skip_to_4() { take((4 - at_ % 4) % 4); }
  size_t at() const { return at_; }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

uint8_t to_byte(float v) { return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f)); }

}  // namespace

std::string encode_scene(const SceneInfo& s) {
  Writer w;
  w.header(MessageType::Scene);
  w.put<uint32_t>(kWireVersion);
  w.put<int32_t>(s.width);
  w.put<int32_t>(s.height);
  w.put<int32_t>(s.stride);
  w.put<int32_t>(s.expected_frames);
  w.put<int32_t>(nearest_confidence_level(s.initial_conf_threshold));
  w.put<uint32_t>(s.session);
  return w.take();
}

std::string encode_end(int frames) {
  Writer w;
  w.header(MessageType::End);
  w.put<int32_t>(frames);
  return w.take();
}

std::string encode_heartbeat() {
  Writer w;
  w.header(MessageType::Heartbeat);
  return w.take();
}

std::string encode_frame(const FrameInput& f, int stride) {
  LB_CHECK(stride >= 1, "viewer: stride {} must be at least 1", stride);
  // The points: every stride-th pixel with a finite position and a confidence above level 0's.
  struct Kept {
    int64_t pixel;
    uint8_t conf, grid;
  };
  std::vector<Kept> kept;
  float lo[3] = {std::numeric_limits<float>::max(), std::numeric_limits<float>::max(),
                 std::numeric_limits<float>::max()};
  float hi[3] = {std::numeric_limits<float>::lowest(), std::numeric_limits<float>::lowest(),
                 std::numeric_limits<float>::lowest()};
  int H = 0, W = 0;
  if (f.image.defined()) {
    H = static_cast<int>(f.image.dim(1));
    W = static_cast<int>(f.image.dim(2));
  }
  if (f.world_points.defined()) {
    LB_CHECK(f.world_points.dim(0) == H && f.world_points.dim(1) == W && f.depth_conf.numel() == int64_t(H) * W,
             "viewer: frame {}: points {} and confidence {} do not match the image {}", f.index,
             shape_str(f.world_points.shape()), shape_str(f.depth_conf.shape()), shape_str(f.image.shape()));
    const float* xyz = f.world_points.f32();
    const float* conf = f.depth_conf.f32();
    for (int y = 0; y < H; y += stride) {
      for (int x = 0; x < W; x += stride) {
        const int64_t p = int64_t(y) * W + x;
        const float* q = xyz + 3 * p;
        if (!std::isfinite(q[0]) || !std::isfinite(q[1]) || !std::isfinite(q[2])) continue;
        const int level = confidence_level(conf[p]);
        if (level < 0) continue;
        kept.push_back({p, static_cast<uint8_t>(level), static_cast<uint8_t>(grid_level(x / stride, y / stride))});
        for (int c = 0; c < 3; ++c) {
          lo[c] = std::min(lo[c], q[c]);
          hi[c] = std::max(hi[c], q[c]);
        }
      }
    }
  }
  float extent[3];
  for (int c = 0; c < 3; ++c) {
    if (kept.empty()) lo[c] = hi[c] = 0;
    extent[c] = hi[c] > lo[c] ? hi[c] - lo[c] : 1.0f;
  }
  const int thumb_step = W > 0 ? (W + kThumbnailMaxWidth - 1) / kThumbnailMaxWidth : 1;
  const int tw = W > 0 ? (W + thumb_step - 1) / thumb_step : 0, th = H > 0 ? (H + thumb_step - 1) / thumb_step : 0;

  Writer w;
  w.header(MessageType::Frame);
  w.put<int32_t>(static_cast<int32_t>(f.index));
  for (const auto& row : f.camera_to_world)
    for (double v : row) w.put<float>(static_cast<float>(v));
  for (const auto& row : f.intrinsic)
    for (double v : row) w.put<float>(static_cast<float>(v));
  w.put<float>(static_cast<float>(f.timestamp));
  w.put<uint32_t>(static_cast<uint32_t>(kept.size()));
  for (float v : lo) w.put<float>(v);
  for (float v : extent) w.put<float>(v);
  w.put<uint16_t>(static_cast<uint16_t>(tw));
  w.put<uint16_t>(static_cast<uint16_t>(th));
  LB_CHECK(w.size() == kFrameHeaderBytes, "viewer: frame header is {} bytes", w.size());

  const float* xyz = f.world_points.defined() ? f.world_points.f32() : nullptr;
  for (const Kept& k : kept)
    for (int c = 0; c < 3; ++c)
      w.put<uint16_t>(static_cast<uint16_t>(std::lround((xyz[3 * k.pixel + c] - lo[c]) / extent[c] * 65535.0f)));
  w.pad_to_4();
  const int64_t plane = int64_t(H) * W;
  const float* rgb = f.image.defined() ? f.image.f32() : nullptr;
  for (const Kept& k : kept)
    for (int c = 0; c < 3; ++c) w.put<uint8_t>(to_byte(rgb[c * plane + k.pixel]));
  for (const Kept& k : kept) w.put<uint8_t>(k.conf);
  for (const Kept& k : kept) w.put<uint8_t>(k.grid);
  w.pad_to_4();
  for (int y = 0; y < H; y += thumb_step)
    for (int x = 0; x < W; x += thumb_step)
      for (int c = 0; c < 3; ++c) w.put<uint8_t>(to_byte(rgb[c * plane + int64_t(y) * W + x]));
  w.pad_to_4();
  return w.take();
}

MessageType message_type(std::string_view message) {
  LB_CHECK(message.size() >= 4 && static_cast<uint8_t>(message[0]) <= 3, "viewer: not a viewer message");
  return static_cast<MessageType>(message[0]);
}

DecodedFrame decode_frame(std::string_view message) {
  LB_CHECK(message_type(message) == MessageType::Frame, "viewer: not a frame message");
  Reader r(message);
  r.take(4);
  DecodedFrame f;
  f.index = r.get<int32_t>();
  for (float& v : f.camera_to_world) v = r.get<float>();
  for (float& v : f.intrinsic) v = r.get<float>();
  f.timestamp = r.get<float>();
  const uint32_t n = r.get<uint32_t>();
  float lo[3], extent[3];
  for (float& v : lo) v = r.get<float>();
  for (float& v : extent) v = r.get<float>();
  f.thumb_width = r.get<uint16_t>();
  f.thumb_height = r.get<uint16_t>();
  f.points.resize(n);
  for (DecodedPoint& p : f.points)
    for (int c = 0; c < 3; ++c) p.xyz[c] = lo[c] + r.get<uint16_t>() / 65535.0f * extent[c];
  r.skip_to_4();
  for (DecodedPoint& p : f.points)
    for (uint8_t& c : p.rgb) c = r.get<uint8_t>();
  for (DecodedPoint& p : f.points) p.confidence_level = r.get<uint8_t>();
  for (DecodedPoint& p : f.points) p.grid_level = r.get<uint8_t>();
  r.skip_to_4();
  r.take(size_t(3) * f.thumb_width * f.thumb_height);
  r.skip_to_4();
  LB_CHECK(r.at() == message.size(), "viewer frame message: {} bytes left over", message.size() - r.at());
  return f;
}

}  // namespace lingbot::viewer
