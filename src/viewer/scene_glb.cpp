#include "viewer/scene_glb.h"

#include "core/error.h"
#include "output/glb_writer.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lingbot::viewer {

namespace {

// write_glb writes a file (through AtomicFile); this one lives in the
// temporary folder only while it is read back.
class TemporaryPath {
 public:
  TemporaryPath() {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("lingbot-viewer-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".glb"))
                .string();
  }
  ~TemporaryPath() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

std::string scene_glb(const std::vector<Message>& messages, const SceneInfo& scene, const GlbFilter& filter) {
  std::vector<DecodedFrame> frames;
  for (const Message& m : messages) {
    if (message_type(*m) != MessageType::Frame) continue;
    DecodedFrame f = decode_frame(*m);
    if (f.index < filter.first_frame || (filter.last_frame >= 0 && f.index > filter.last_frame)) continue;
    frames.push_back(std::move(f));
  }
  // The cameras as a Predictions (all write_glb reads of it), the points as the exporters' SelectedPoint.
  io::Predictions p;
  p.path = "viewer";
  p.frames = static_cast<int>(frames.size());
  p.width = scene.width;
  p.height = scene.height;
  p.extrinsic = Tensor::empty({p.frames, 3, 4});
  p.intrinsic = Tensor::empty({p.frames, 3, 3});
  std::vector<io::SelectedPoint> points;
  for (int i = 0; i < p.frames; ++i) {
    const DecodedFrame& f = frames[static_cast<size_t>(i)];
    std::copy(f.camera_to_world.begin(), f.camera_to_world.end(), p.extrinsic.f32() + 12 * i);
    std::copy(f.intrinsic.begin(), f.intrinsic.end(), p.intrinsic.f32() + 9 * i);
    for (const DecodedPoint& d : f.points) {
      if (d.confidence_level < filter.min_confidence_level || d.grid_level < filter.min_grid_level) continue;
      io::SelectedPoint s{};
      std::copy(d.xyz, d.xyz + 3, s.xyz);
      std::copy(d.rgb, d.rgb + 3, s.rgb);
      s.confidence = confidence_of_level(d.confidence_level);
      s.frame = f.index;
      points.push_back(s);
    }
  }
  TemporaryPath file;
  io::write_glb(p, points, file.path());
  std::ifstream in(file.path(), std::ios::binary);
  LB_CHECK(in.good(), "{}: cannot read back the GLB", file.path());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace lingbot::viewer
