// nerfstudio / instant-ngp `transforms.json`: per frame the camera-to-world
// matrix in OpenGL axes (x right, y up, z backward; our OpenCV camera-to-world
// with its y and z columns negated), the image path and the pinhole
// intrinsics (per frame: the model predicts a focal length for each), plus
// `ply_file_path` naming the point cloud written beside it.
#pragma once

#include "output/predictions.h"

#include <string>
#include <vector>

namespace lingbot::io {

// `image_paths`: per frame, relative to the folder of transforms.json.
void write_nerfstudio_transforms(const Predictions& p, const std::vector<std::string>& image_paths,
                                 const std::string& ply_name, const std::string& path);

}  // namespace lingbot::io
