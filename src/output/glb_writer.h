// glTF 2.0 binary (.glb): the coloured point cloud (POINTS, POSITION float32
// + COLOR_0 RGBA unsigned byte normalized), one frustum per camera (LINES)
// and the camera path (LINE_STRIP). Coordinates in the buffers are the
// model's world (OpenCV: y down, z forward); the root node turns them 180
// degrees about x into glTF's y-up convention, so viewers show the scene
// upright. Frustums are sized from the scene (5% of the cloud's bounding box
// diagonal, or of the path's when there are no points).
#pragma once

#include "output/point_selection.h"
#include "output/predictions.h"

#include <string>
#include <vector>

namespace lingbot::io {

void write_glb(const Predictions& p, const std::vector<SelectedPoint>& points, const std::string& path);

}  // namespace lingbot::io
