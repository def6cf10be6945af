#include "output/nerfstudio_writer.h"

#include "output/atomic_file.h"

#include <nlohmann/json.hpp>

namespace lingbot::io {

void write_nerfstudio_transforms(const Predictions& p, const std::vector<std::string>& image_paths,
                                 const std::string& ply_name, const std::string& path) {
  nlohmann::ordered_json doc;
  // nerfstudio's OPENCV model with zero distortion is a pinhole camera; it has no PINHOLE name.
  doc["camera_model"] = "OPENCV";
  doc["ply_file_path"] = ply_name;
  nlohmann::ordered_json frames = nlohmann::ordered_json::array();
  for (int f = 0; f < p.frames; ++f) {
    const auto c2w = p.camera_to_world(f);
    const auto K = p.intrinsic_matrix(f);
    nlohmann::ordered_json m = nlohmann::ordered_json::array();
    for (int r = 0; r < 3; ++r) m.push_back({c2w[r][0], -c2w[r][1], -c2w[r][2], c2w[r][3]});
    m.push_back({0.0, 0.0, 0.0, 1.0});
    nlohmann::ordered_json frame;
    frame["file_path"] = image_paths[static_cast<size_t>(f)];
    frame["transform_matrix"] = m;
    // nerfstudio casts rays through pixel centres at +0.5; the model's pixel centres are at integers.
    frame["fl_x"] = K[0][0];
    frame["fl_y"] = K[1][1];
    frame["cx"] = K[0][2] + 0.5;
    frame["cy"] = K[1][2] + 0.5;
    frame["w"] = p.width;
    frame["h"] = p.height;
    frame["colmap_im_id"] = f + 1;  // the image id of the same frame in --format colmap
    frames.push_back(std::move(frame));
  }
  doc["frames"] = std::move(frames);
  AtomicFile out(path);
  out.write(doc.dump(2) + "\n");
  out.commit();
}

}  // namespace lingbot::io
