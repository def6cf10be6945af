#include "output/nerfstudio_writer.h"

#include "output/atomic_file.h"

#include <nlohmann/json.hpp>

namespace lingbot::io {

std::string nerfstudio_frame_entry(int index, const std::array<std::array<double, 4>, 3>& c2w,
                                   const std::array<std::array<double, 3>, 3>& K, int width, int height,
                                   const std::string& image_path) {
  nlohmann::ordered_json m = nlohmann::ordered_json::array();
  for (int r = 0; r < 3; ++r) m.push_back({c2w[r][0], -c2w[r][1], -c2w[r][2], c2w[r][3]});
  m.push_back({0.0, 0.0, 0.0, 1.0});
  nlohmann::ordered_json frame;
  frame["file_path"] = image_path;
  frame["transform_matrix"] = m;
  // nerfstudio casts rays through pixel centres at +0.5; the model's pixel centres are at integers.
  frame["fl_x"] = K[0][0];
  frame["fl_y"] = K[1][1];
  frame["cx"] = K[0][2] + 0.5;
  frame["cy"] = K[1][2] + 0.5;
  frame["w"] = width;
  frame["h"] = height;
  frame["colmap_im_id"] = index + 1;  // the image id of the same frame in --format colmap
  // Indented as an element of the top-level "frames" array.
  std::string text = index > 0 ? ",\n    " : "    ";
  for (char c : frame.dump(2)) {
    text += c;
    if (c == '\n') text += "    ";
  }
  return text;
}

void write_nerfstudio_transforms(TextSpool& entries, const std::string& ply_name, const std::string& path) {
  // nerfstudio's OPENCV model with zero distortion is a pinhole camera; it has no PINHOLE name.
  AtomicFile out(path);
  out.write("{\n  \"camera_model\": \"OPENCV\",\n  \"ply_file_path\": " + nlohmann::json(ply_name).dump() +
            ",\n  \"frames\": [\n");
  entries.copy_into(out);
  out.write("\n  ]\n}\n");
  out.commit();
}

}  // namespace lingbot::io
