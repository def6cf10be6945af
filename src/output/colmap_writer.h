// A COLMAP sparse model (cameras, images, points3D) in COLMAP's binary or
// text format, as COLMAP 3.x reads it (model_analyzer, the GUI, mapper
// --input_path, and the many tools that load sparse/0).
//
// One PINHOLE camera per frame (camera id = image id = frame + 1), at the
// resolution of the saved (preprocessed) images. COLMAP puts the centre of
// the top-left pixel at (0.5, 0.5) while the model puts it at (0, 0), so
// cx, cy and every POINTS2D position carry +0.5. Poses are world-to-camera
// (qw qx qy qz, t), the inverse of predictions.npz's camera-to-world.
// Each 3D point has a track of length one: the pixel it was unprojected from.
//
// The cameras file can be written as frames stream (its entries need only
// the frame); the images file lists each image's observations, so it and
// points3D are written once the cloud is final.
#pragma once

#include "output/point_selection.h"
#include "output/predictions.h"
#include "output/text_spool.h"

#include <array>

#include <string>
#include <vector>

namespace lingbot::io {

struct ColmapModelStats {
  int64_t points = 0;
  double mean_reprojection_error = 0;  // pixels, of each point in the frame it came from
};

// One camera's entry (camera id = index + 1), binary or text.
std::string colmap_camera_entry(int index, const std::array<std::array<double, 3>, 3>& intrinsic, int width,
                                int height, bool text);
// DIR/cameras.{bin|txt}: the count (or text header), then the entries.
void write_colmap_cameras(TextSpool& entries, const std::string& dir, bool text);
// DIR/{images,points3D}.{bin|txt}; `image_names` per frame (relative to the images folder).
ColmapModelStats write_colmap_images_and_points(const Predictions& p, const std::vector<SelectedPoint>& points,
                                                const std::vector<std::string>& image_names, const std::string& dir,
                                                bool text);
// All three files of a saved result's cameras.
ColmapModelStats write_colmap_model(const Predictions& p, const std::vector<SelectedPoint>& points,
                                    const std::vector<std::string>& image_names, const std::string& dir, bool text);

}  // namespace lingbot::io
