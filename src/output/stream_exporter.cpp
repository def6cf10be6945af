#include "output/stream_exporter.h"

#include "core/error.h"
#include "output/atomic_file.h"
#include "output/colmap_writer.h"
#include "output/depth_image_writer.h"
#include "output/exr_writer.h"
#include "output/glb_writer.h"
#include "output/nerfstudio_writer.h"
#include "output/png_writer.h"
#include "output/point_cloud_writer.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace lingbot::io {

namespace {

// Time spent in a scope, added to `total`.
struct Stopwatch {
  std::chrono::steady_clock::duration& total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~Stopwatch() { total += std::chrono::steady_clock::now() - t0; }
};

std::array<std::array<double, 4>, 3> matrix3x4(const float* m) {
  std::array<std::array<double, 4>, 3> out{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) out[i][j] = m[i * 4 + j];
  return out;
}

std::array<std::array<double, 3>, 3> matrix3x3(const float* m) {
  std::array<std::array<double, 3>, 3> out{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) out[i][j] = m[i * 3 + j];
  return out;
}

}  // namespace

StreamingExporter::StreamingExporter(ExportOptions options, int height, int width)
    : o_(std::move(options)), height_(height), width_(width), points_(o_.points) {
  LB_CHECK(height_ > 0 && width_ > 0, "{}: nothing to export but poses (no depth: a --no-dense result)", o_.out_dir);
  if (o_.depth_exr) require_exr("--depth-exr");
  make_dirs(o_.out_dir);
  if (wants("colmap") || wants("nerfstudio")) make_dirs(o_.out_dir + "/images");
  if (wants("depth")) make_depth_dirs(o_.out_dir, o_.depth_exr);
  if (wants("colmap")) {
    make_dirs(colmap_dir());
    colmap_cameras_ = std::make_unique<TextSpool>(colmap_dir() + (o_.colmap_text ? "/cameras.txt" : "/cameras.bin"));
  }
  if (wants("nerfstudio")) nerfstudio_frames_ = std::make_unique<TextSpool>(o_.out_dir + "/transforms.json");
}

StreamingExporter::~StreamingExporter() = default;

std::string StreamingExporter::colmap_dir() const { return o_.out_dir + "/sparse/0"; }

bool StreamingExporter::wants(const char* format) const {
  return std::find(o_.formats.begin(), o_.formats.end(), format) != o_.formats.end();
}

void StreamingExporter::add(const ExportFrame& f) {
  LB_CHECK(!finished_, "StreamingExporter: add() after finish()");
  Stopwatch watch{spent_};
  const int index = frames();
  extrinsic_.insert(extrinsic_.end(), f.extrinsic, f.extrinsic + 12);
  intrinsic_.insert(intrinsic_.end(), f.intrinsic, f.intrinsic + 9);
  names_.push_back(f.name);
  const int64_t plane = int64_t{height_} * width_;
  if (wants("colmap") || wants("nerfstudio")) {
    // The pixels the cameras' intrinsics refer to: the preprocessed frame.
    std::vector<uint8_t> rgb(static_cast<size_t>(plane * 3));
    for (int64_t i = 0; i < plane; ++i)
      for (int c = 0; c < 3; ++c) rgb[static_cast<size_t>(3 * i + c)] = color_byte(f.images[c * plane + i]);
    write_png8(o_.out_dir + "/images/" + f.name + ".png", rgb.data(), width_, height_, 3);
  }
  if (wants("depth"))
    write_depth_frame(o_.out_dir, f.name, f.depth, f.confidence, width_, height_, o_.depth_exr);
  if (colmap_cameras_)
    colmap_cameras_->append(colmap_camera_entry(index, matrix3x3(f.intrinsic), width_, height_, o_.colmap_text));
  if (nerfstudio_frames_)
    nerfstudio_frames_->append(nerfstudio_frame_entry(index, matrix3x4(f.extrinsic), matrix3x3(f.intrinsic), width_,
                                                      height_, "images/" + f.name + ".png"));
  if (wants("colmap") || wants("nerfstudio") || wants("glb") || wants("ply"))
    points_.add_frame(index, height_, width_, f.world_points, f.confidence, f.images);
}

ExportSummary StreamingExporter::finish() {
  LB_CHECK(!finished_, "StreamingExporter: finish() twice");
  finished_ = true;
  Stopwatch watch{spent_};
  ExportSummary summary;
  const std::vector<SelectedPoint> points = points_.finish();
  summary.points = static_cast<int64_t>(points.size());

  // The cameras, as a saved result without its dense arrays holds them.
  Predictions cameras;
  cameras.path = o_.out_dir;
  cameras.frames = frames();
  cameras.height = height_;
  cameras.width = width_;
  cameras.extrinsic = Tensor::empty({cameras.frames, 3, 4});
  cameras.intrinsic = Tensor::empty({cameras.frames, 3, 3});
  std::copy(extrinsic_.begin(), extrinsic_.end(), cameras.extrinsic.f32());
  std::copy(intrinsic_.begin(), intrinsic_.end(), cameras.intrinsic.f32());
  cameras.frame_names = names_;

  std::vector<std::string> image_files;
  for (const std::string& name : names_) image_files.push_back(name + ".png");
  if (colmap_cameras_) {
    write_colmap_cameras(*colmap_cameras_, colmap_dir(), o_.colmap_text);
    colmap_cameras_.reset();
    const ColmapModelStats stats =
        write_colmap_images_and_points(cameras, points, image_files, colmap_dir(), o_.colmap_text);
    summary.colmap_mean_reprojection_error = stats.mean_reprojection_error;
  }
  if (nerfstudio_frames_) {
    write_points_ply(o_.out_dir + "/sparse_pc.ply", points);
    write_nerfstudio_transforms(*nerfstudio_frames_, "sparse_pc.ply", o_.out_dir + "/transforms.json");
    nerfstudio_frames_.reset();
  }
  if (wants("glb")) write_glb(cameras, points, o_.out_dir + "/scene.glb");
  if (wants("depth")) write_depth_scale(o_.out_dir, width_, height_, o_.depth_exr);
  if (wants("ply")) write_points_ply(o_.out_dir + "/points.ply", points);
  summary.seconds = std::chrono::duration<double>(spent_ + (std::chrono::steady_clock::now() - watch.t0)).count();
  return summary;
}

}  // namespace lingbot::io
