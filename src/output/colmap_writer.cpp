#include "output/colmap_writer.h"

#include "output/atomic_file.h"
#include "output/trajectory_writer.h"

#include <fmt/format.h>

#include <cmath>

namespace lingbot::io {

namespace {

constexpr int kPinholeModelId = 1;  // COLMAP's CameraModelId for PINHOLE (fx, fy, cx, cy)

template <typename T>
void put(std::string& buf, T value) {
  buf.append(reinterpret_cast<const char*>(&value), sizeof(T));  // COLMAP's binary files are little-endian
}

struct Pose {
  double q[4];  // qw qx qy qz
  double t[3];
};

Pose world_to_camera_pose(const Predictions& p, int frame) {
  const auto w2c = p.world_to_camera(frame);
  const auto xyzw = rotation_to_quaternion(w2c);
  // Unit length exactly as COLMAP keeps it (it normalises on reading; the float rotation is unit only to ~1e-7).
  const double n = std::sqrt(xyzw[0] * xyzw[0] + xyzw[1] * xyzw[1] + xyzw[2] * xyzw[2] + xyzw[3] * xyzw[3]);
  return {{xyzw[3] / n, xyzw[0] / n, xyzw[1] / n, xyzw[2] / n}, {w2c[0][3], w2c[1][3], w2c[2][3]}};
}

}  // namespace

std::string colmap_camera_entry(int index, const std::array<std::array<double, 3>, 3>& K, int width, int height,
                                bool text) {
  const double params[4] = {K[0][0], K[1][1], K[0][2] + 0.5, K[1][2] + 0.5};
  const uint32_t id = static_cast<uint32_t>(index + 1);
  if (text)
    return fmt::format("{} PINHOLE {} {} {} {} {} {}\n", id, width, height, params[0], params[1], params[2], params[3]);
  std::string entry;
  put<uint32_t>(entry, id);
  put<int32_t>(entry, kPinholeModelId);
  put<uint64_t>(entry, static_cast<uint64_t>(width));
  put<uint64_t>(entry, static_cast<uint64_t>(height));
  for (double v : params) put<double>(entry, v);
  return entry;
}

void write_colmap_cameras(TextSpool& entries, const std::string& dir, bool text) {
  make_dirs(dir);
  std::string head;
  if (text)
    head = fmt::format("# Camera list with one line of data per camera:\n"
                       "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n# Number of cameras: {}\n", entries.entries());
  else
    put<uint64_t>(head, static_cast<uint64_t>(entries.entries()));
  AtomicFile out(dir + "/cameras" + (text ? ".txt" : ".bin"));
  out.write(head);
  entries.copy_into(out);
  out.commit();
}

ColmapModelStats write_colmap_model(const Predictions& p, const std::vector<SelectedPoint>& points,
                                    const std::vector<std::string>& image_names, const std::string& dir, bool text) {
  make_dirs(dir);
  {
    TextSpool cameras(dir + "/cameras" + (text ? ".txt" : ".bin"));
    for (int f = 0; f < p.frames; ++f) cameras.append(colmap_camera_entry(f, p.intrinsic_matrix(f), p.width, p.height, text));
    write_colmap_cameras(cameras, dir, text);
  }
  return write_colmap_images_and_points(p, points, image_names, dir, text);
}

ColmapModelStats write_colmap_images_and_points(const Predictions& p, const std::vector<SelectedPoint>& points,
                                                const std::vector<std::string>& image_names, const std::string& dir,
                                                bool text) {
  make_dirs(dir);
  const int S = p.frames;
  // POINTS2D of each image: its selected points in selection order.
  std::vector<std::vector<int64_t>> points_of_frame(static_cast<size_t>(S));
  std::vector<uint64_t> point2d_index(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    auto& list = points_of_frame[static_cast<size_t>(points[i].frame)];
    point2d_index[i] = list.size();
    list.push_back(static_cast<int64_t>(i));
  }
  // The reprojection error of each point in its own frame: 0 up to float rounding
  // when world_points are the unprojected depth (as `run` writes them).
  std::vector<double> errors(points.size());
  ColmapModelStats stats;
  stats.points = static_cast<int64_t>(points.size());
  std::vector<std::array<std::array<double, 4>, 3>> world_to_camera(static_cast<size_t>(S));
  std::vector<std::array<std::array<double, 3>, 3>> intrinsics(static_cast<size_t>(S));
  for (int f = 0; f < S; ++f) {
    world_to_camera[static_cast<size_t>(f)] = p.world_to_camera(f);
    intrinsics[static_cast<size_t>(f)] = p.intrinsic_matrix(f);
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const SelectedPoint& s = points[i];
    const auto& w2c = world_to_camera[static_cast<size_t>(s.frame)];
    const auto& K = intrinsics[static_cast<size_t>(s.frame)];
    double c[3];
    for (int r = 0; r < 3; ++r) c[r] = w2c[r][0] * s.xyz[0] + w2c[r][1] * s.xyz[1] + w2c[r][2] * s.xyz[2] + w2c[r][3];
    const double u = K[0][0] * c[0] / c[2] + K[0][2], v = K[1][1] * c[1] / c[2] + K[1][2];
    errors[i] = std::hypot(u - s.x, v - s.y);
    stats.mean_reprojection_error += errors[i];
  }
  if (!points.empty()) stats.mean_reprojection_error /= static_cast<double>(points.size());

  const std::string ext = text ? ".txt" : ".bin";
  std::string images, points3d;
  if (text) {
    images = fmt::format("# Image list with two lines of data per image:\n"
                         "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n"
                         "#   POINTS2D[] as (X, Y, POINT3D_ID)\n# Number of images: {}\n", S);
    points3d = fmt::format("# 3D point list with one line of data per point:\n"
                           "#   POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n"
                           "# Number of points: {}\n", points.size());
  } else {
    put<uint64_t>(images, static_cast<uint64_t>(S));
    put<uint64_t>(points3d, points.size());
  }
  for (int f = 0; f < S; ++f) {
    const uint32_t id = static_cast<uint32_t>(f + 1);
    const Pose pose = world_to_camera_pose(p, f);
    const auto& own = points_of_frame[static_cast<size_t>(f)];
    if (text) {
      images += fmt::format("{} {} {} {} {} {} {} {} {} {}\n", id, pose.q[0], pose.q[1], pose.q[2], pose.q[3],
                            pose.t[0], pose.t[1], pose.t[2], id, image_names[static_cast<size_t>(f)]);
      for (size_t k = 0; k < own.size(); ++k) {
        const SelectedPoint& s = points[static_cast<size_t>(own[k])];
        images += fmt::format("{}{} {} {}", k ? " " : "", s.x + 0.5, s.y + 0.5, own[k] + 1);
      }
      images += '\n';
    } else {
      put<uint32_t>(images, id);
      for (double v : pose.q) put<double>(images, v);
      for (double v : pose.t) put<double>(images, v);
      put<uint32_t>(images, id);
      images += image_names[static_cast<size_t>(f)];
      images += '\0';
      put<uint64_t>(images, own.size());
      for (int64_t i : own) {
        const SelectedPoint& s = points[static_cast<size_t>(i)];
        put<double>(images, s.x + 0.5);
        put<double>(images, s.y + 0.5);
        put<uint64_t>(images, static_cast<uint64_t>(i + 1));
      }
    }
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const SelectedPoint& s = points[i];
    const uint32_t image_id = static_cast<uint32_t>(s.frame + 1);
    if (text) {
      // As doubles, like the binary model: the text then holds the same numbers digit for digit.
      points3d += fmt::format("{} {} {} {} {} {} {} {} {} {}\n", i + 1, double{s.xyz[0]}, double{s.xyz[1]},
                              double{s.xyz[2]}, s.rgb[0], s.rgb[1], s.rgb[2], errors[i], image_id, point2d_index[i]);
    } else {
      put<uint64_t>(points3d, i + 1);
      for (float v : s.xyz) put<double>(points3d, v);
      for (uint8_t v : s.rgb) put<uint8_t>(points3d, v);
      put<double>(points3d, errors[i]);
      put<uint64_t>(points3d, 1);
      put<uint32_t>(points3d, image_id);
      put<uint32_t>(points3d, static_cast<uint32_t>(point2d_index[i]));
    }
  }
  for (auto [name, bytes] : {std::pair{"images", &images}, {"points3D", &points3d}}) {
    AtomicFile out(dir + "/" + name + ext);
    out.write(*bytes);
    out.commit();
  }
  return stats;
}

}  // namespace lingbot::io
