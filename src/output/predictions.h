// A saved result (`run --out DIR`'s predictions.npz) loaded for export, with
// its arrays checked against each other once so the writers can index freely.
#pragma once

#include "core/tensor.h"

#include <array>
#include <string>
#include <vector>

namespace lingbot::io {

struct Predictions {
  std::string path;  // the predictions.npz, for messages
  int frames = 0, height = 0, width = 0;
  Tensor extrinsic;     // [S,3,4] float32, camera-to-world, OpenCV axes (x right, y down, z forward)
  Tensor intrinsic;     // [S,3,3] float32, pixel units of the saved images, pixel centres at integers
  Tensor depth;         // [S,H,W] float32 (the npz's [S,H,W,1])
  Tensor depth_conf;    // [S,H,W] float32
  Tensor world_points;  // [S,H,W,3] float32
  Tensor images;        // [S,3,H,W] float32 in [0,1]
  // Per frame: the input's name as `run` recorded it in the npz's `frames`
  // (the file's name, e.g. "IMG_0042.jpg"; NNNNNN for a video's frames), or
  // NNNNNN for a result without `frames`.
  std::vector<std::string> frame_files;
  // What exported files are named after: frame_files without the image
  // extension ("IMG_0042"), unless two would collide (a.png, a.jpg): then
  // the whole names.
  std::vector<std::string> frame_names;

  std::array<std::array<double, 4>, 3> camera_to_world(int frame) const;
  std::array<std::array<double, 4>, 3> world_to_camera(int frame) const;
  std::array<std::array<double, 3>, 3> intrinsic_matrix(int frame) const;
  // 8-bit colour of pixel p (= y * W + x) of a frame.
  std::array<uint8_t, 3> color(int frame, int64_t pixel) const;
};

// frame_files -> frame_names (see Predictions).
std::vector<std::string> export_names(const std::vector<std::string>& frame_files);

// Reads DIR/predictions.npz (or the .npz file itself). Every problem is one
// line naming the file: missing file, missing array, shapes that disagree.
// `dense` false: only the cameras are required (a `run --no-dense` result).
Predictions load_predictions(const std::string& result_dir_or_npz, bool dense = true);

}  // namespace lingbot::io
