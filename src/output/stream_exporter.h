// The export formats written while frames stream in: `run --export` feeds
// it each frame as the model hands it out, and `export` feeds it a saved
// result's frames, so both write the same files from the same code.
//
// As a frame arrives:  images/NAME.png (colmap, nerfstudio),
//                      depth/NAME.png, depth_conf/NAME.png (, depth_exr/NAME.exr),
//                      its COLMAP camera entry and its transforms.json frame
//                      entry (into spools, text_spool.h: the files' headers
//                      need the count), its points into the PointAccumulator
//                      (point_selection.h);
// at finish():         sparse/0/cameras (head + spooled entries), images and
//                      points3D (colmap), transforms.json (head + spooled
//                      entries) + sparse_pc.ply (nerfstudio), scene.glb,
//                      points.ply, depth_scale.json.
// Each file is renamed into place when whole (AtomicFile), so an error or a
// signal leaves the frames done so far complete and no half-written file;
// the files of finish() appear only if it runs, and the spools go with the
// exporter. Memory: the kept points (point_selection.h says which options
// hold more) and each frame's camera (21 floats and its name) for the files
// written at the end, whose layout needs the final cloud (COLMAP's images
// list each image's observations; the glb's frustums are sized from it).
#pragma once

#include "output/exporters.h"
#include "output/point_selection.h"
#include "output/text_spool.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace lingbot::io {

// One frame's results as the exporters read them; pointers into the caller's buffers, H x W.
struct ExportFrame {
  std::string name;           // what its files are named after (Predictions::frame_names)
  const float* extrinsic;     // [3,4] camera-to-world, float as predictions.npz holds it
  const float* intrinsic;     // [3,3]
  const float* depth;         // [H*W]
  const float* confidence;    // [H*W], sky already 0
  const float* world_points;  // [H*W*3]
  const float* images;        // [3*H*W] planar RGB in [0,1]
};

class StreamingExporter {
 public:
  // Makes out_dir and the per-frame folders; checks --depth-exr against the build.
  StreamingExporter(ExportOptions options, int height, int width);
  ~StreamingExporter();  // unfinished: the spools are removed; the per-frame files stay (each whole)

  void add(const ExportFrame& frame);  // frames in order, from 0
  ExportSummary finish();              // once

  int frames() const { return static_cast<int>(names_.size()); }

 private:
  bool wants(const char* format) const;
  std::string colmap_dir() const;

  ExportOptions o_;
  int height_, width_;
  PointAccumulator points_;
  std::vector<float> extrinsic_, intrinsic_;  // 12 and 9 per frame
  std::vector<std::string> names_;
  std::unique_ptr<TextSpool> colmap_cameras_, nerfstudio_frames_;  // per-frame entries
  std::chrono::steady_clock::duration spent_{};
  bool finished_ = false;
};

}  // namespace lingbot::io
