#include "output/predictions.h"

#include "core/error.h"
#include "output/npz_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace lingbot::io {

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::vector<std::string> export_names(const std::vector<std::string>& files) {
  std::vector<std::string> stems;
  for (const std::string& f : files) {
    const size_t dot = f.rfind('.');
    std::string ext = dot == std::string::npos ? std::string() : f.substr(dot + 1);
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool image = ext == "png" || ext == "jpg" || ext == "jpeg";
    stems.push_back(image && dot > 0 ? f.substr(0, dot) : f);
  }
  std::vector<std::string> sorted = stems;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return files;
  return stems;
}

Predictions load_predictions(const std::string& where, bool dense) {
  Predictions p;
  p.path = is_dir(where) ? where + "/predictions.npz" : where;
  struct stat st {};
  LB_CHECK(stat(p.path.c_str(), &st) == 0, "{}: not found (expected a `lingbot-map run --out` folder)", p.path);
  std::map<std::string, Tensor> arrays = read_npz(p.path);
  auto take = [&](const char* key) -> Tensor {
    auto it = arrays.find(key);
    LB_CHECK(it != arrays.end(), "{}: has no '{}' array", p.path, key);
    LB_CHECK(it->second.dtype() == DType::F32, "{}: '{}' is not float32", p.path, key);
    return std::move(it->second);
  };
  p.extrinsic = take("extrinsic");
  p.intrinsic = take("intrinsic");
  const Shape& e = p.extrinsic.shape();
  LB_CHECK(e.size() == 3 && e[1] == 3 && e[2] == 4, "{}: 'extrinsic' has shape {}, expected [S,3,4]", p.path,
           shape_str(e));
  p.frames = static_cast<int>(e[0]);
  LB_CHECK(p.intrinsic.shape() == (Shape{e[0], 3, 3}), "{}: 'intrinsic' has shape {}, expected [{},3,3]", p.path,
           shape_str(p.intrinsic.shape()), e[0]);
  if (dense) {
    p.depth = take("depth");
    const Shape& d = p.depth.shape();
    LB_CHECK(d.size() == 4 && d[0] == e[0] && d[3] == 1, "{}: 'depth' has shape {}, expected [{},H,W,1]", p.path,
             shape_str(d), e[0]);
    p.height = static_cast<int>(d[1]);
    p.width = static_cast<int>(d[2]);
    const int64_t S = e[0], H = d[1], W = d[2];
    p.depth = p.depth.reshape({S, H, W});
    p.depth_conf = take("depth_conf");
    p.world_points = take("world_points");
    p.images = take("images");
    auto expect = [&](const Tensor& t, const char* key, const Shape& want) {
      LB_CHECK(t.shape() == want, "{}: '{}' has shape {}, expected {}", p.path, key, shape_str(t.shape()),
               shape_str(want));
    };
    expect(p.depth_conf, "depth_conf", {S, H, W});
    expect(p.world_points, "world_points", {S, H, W, 3});
    expect(p.images, "images", {S, 3, H, W});
  }
  if (auto it = arrays.find("frames"); it != arrays.end()) {
    p.frame_files = decode_strings(it->second, p.path + ": 'frames'");
    LB_CHECK(static_cast<int>(p.frame_files.size()) == p.frames, "{}: 'frames' names {} frames, 'extrinsic' has {}",
             p.path, p.frame_files.size(), p.frames);
  } else {
    for (int i = 0; i < p.frames; ++i) p.frame_files.push_back(fmt::format("{:06d}", i));
  }
  p.frame_names = export_names(p.frame_files);
  return p;
}

std::array<std::array<double, 4>, 3> Predictions::camera_to_world(int frame) const {
  std::array<std::array<double, 4>, 3> m{};
  const float* src = extrinsic.f32() + 12 * frame;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) m[i][j] = src[i * 4 + j];
  return m;
}

std::array<std::array<double, 4>, 3> Predictions::world_to_camera(int frame) const {
  // [R | t]^-1 = [R^T | -R^T t]; R is a rotation (the camera head's unit quaternion).
  const auto c2w = camera_to_world(frame);
  std::array<std::array<double, 4>, 3> m{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) m[i][j] = c2w[j][i];
    m[i][3] = -(c2w[0][i] * c2w[0][3] + c2w[1][i] * c2w[1][3] + c2w[2][i] * c2w[2][3]);
  }
  return m;
}

std::array<std::array<double, 3>, 3> Predictions::intrinsic_matrix(int frame) const {
  std::array<std::array<double, 3>, 3> m{};
  const float* src = intrinsic.f32() + 9 * frame;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) m[i][j] = src[i * 3 + j];
  return m;
}

std::array<uint8_t, 3> Predictions::color(int frame, int64_t pixel) const {
  const int64_t plane = int64_t{height} * width;
  const float* img = images.f32() + 3 * plane * frame;
  std::array<uint8_t, 3> rgb{};
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<uint8_t>(std::lround(std::clamp(img[c * plane + pixel], 0.0f, 1.0f) * 255.0f));
  return rgb;
}

}  // namespace lingbot::io
