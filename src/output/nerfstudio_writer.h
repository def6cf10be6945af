// nerfstudio / instant-ngp `transforms.json`: per frame the camera-to-world
// matrix in OpenGL axes (x right, y up, z backward; our OpenCV camera-to-world
// with its y and z columns negated), the image path and the pinhole
// intrinsics (per frame: the model predicts a focal length for each), plus
// `ply_file_path` naming the point cloud written beside it.
//
// Written in pieces so the frames' entries can go out as frames stream
// (stream_exporter.h): each entry is complete when its frame is, and the
// file is the head, the entries and the tail.
#pragma once

#include "output/predictions.h"
#include "output/text_spool.h"

#include <array>
#include <string>
#include <vector>

namespace lingbot::io {

// One element of "frames" (JSON, indented for its place in the file; the
// entries after the first start with ",\n"). `index`: the frame, from 0.
std::string nerfstudio_frame_entry(int index, const std::array<std::array<double, 4>, 3>& camera_to_world,
                                   const std::array<std::array<double, 3>, 3>& intrinsic, int width, int height,
                                   const std::string& image_path);

// transforms.json from the entries in `entries` (renamed into place when whole).
void write_nerfstudio_transforms(TextSpool& entries, const std::string& ply_name, const std::string& path);

}  // namespace lingbot::io
