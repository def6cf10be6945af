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
#pragma once

#include "output/point_selection.h"
#include "output/predictions.h"

#include <string>
#include <vector>

namespace lingbot::io {

struct ColmapModelStats {
  int64_t points = 0;
  double mean_reprojection_error = 0;  // pixels, of each point in the frame it came from
};

// Writes DIR/{cameras,images,points3D}.{bin|txt}; `image_names` per frame (relative to the images folder).
ColmapModelStats write_colmap_model(const Predictions& p, const std::vector<SelectedPoint>& points,
                                    const std::vector<std::string>& image_names, const std::string& dir, bool text);

}  // namespace lingbot::io
