// The export writers (src/output/exporters.h and the per-format writers)
// against a hand-made result: known rotations, translations, intrinsics and
// depths, with world points unprojected here, so every expected value is
// computed from the inputs, not from the code under test. Files are read back
// with readers written in this test (COLMAP's binary layout, nlohmann for
// JSON); the real peers (colmap, the glTF validator) check the same writers
// end to end in tests/app/export_test.cpp.
#include "output/atomic_file.h"
#include "output/colmap_writer.h"
#include "output/depth_image_writer.h"
#include "output/exporters.h"
#include "output/point_selection.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

using namespace lingbot;

namespace {

using Mat3d = std::array<std::array<double, 3>, 3>;

Mat3d rotation(const double axis[3], double angle) {  // Rodrigues
  const double n = std::sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]);
  const double x = axis[0] / n, y = axis[1] / n, z = axis[2] / n, c = std::cos(angle), s = std::sin(angle), C = 1 - c;
  return {{{c + x * x * C, x * y * C - z * s, x * z * C + y * s},
           {y * x * C + z * s, c + y * y * C, y * z * C - x * s},
           {z * x * C - y * s, z * y * C + x * s, c + z * z * C}}};
}

constexpr int kFrames = 3, kH = 4, kW = 6;

struct HandMade {
  io::Predictions p;
  std::vector<Mat3d> R;                        // camera-to-world rotations
  std::vector<std::array<double, 3>> t;        // camera centres
};

// Confidence 1 + (x % 3): threshold 1.5 keeps x % 3 != 0. Pixel (1, 2) of frame 1 is NaN.
HandMade hand_made() {
  HandMade h;
  io::Predictions& p = h.p;
  p.path = "hand-made";
  p.frames = kFrames, p.height = kH, p.width = kW;
  p.extrinsic = Tensor::empty({kFrames, 3, 4});
  p.intrinsic = Tensor::empty({kFrames, 3, 3});
  p.depth = Tensor::empty({kFrames, kH, kW});
  p.depth_conf = Tensor::empty({kFrames, kH, kW});
  p.world_points = Tensor::empty({kFrames, kH, kW, 3});
  p.images = Tensor::empty({kFrames, 3, kH, kW});
  for (int f = 0; f < kFrames; ++f) {
    const double axis[3] = {0.3, 1.0 - 0.2 * f, 0.1 * f};
    h.R.push_back(rotation(axis, 0.2 + 0.3 * f));
    h.t.push_back({0.5 * f, -0.25 * f, 0.1 + f});
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) p.extrinsic.f32()[f * 12 + r * 4 + c] = static_cast<float>(h.R[f][r][c]);
      p.extrinsic.f32()[f * 12 + r * 4 + 3] = static_cast<float>(h.t[f][r]);
    }
    const float K[9] = {5.0f + f, 0, kW / 2.0f, 0, 6.0f + f, kH / 2.0f, 0, 0, 1};
    std::memcpy(p.intrinsic.f32() + 9 * f, K, sizeof K);
    // The rotation as stored (float), for unprojecting exactly as a float result holds it.
    for (int y = 0; y < kH; ++y)
      for (int x = 0; x < kW; ++x) {
        const int64_t i = (int64_t{f} * kH + y) * kW + x;
        const double d = 1.0 + 0.1 * (x + y) + 0.5 * f;
        p.depth.f32()[i] = static_cast<float>(d);
        p.depth_conf.f32()[i] = 1.0f + static_cast<float>(x % 3);
        const double cam[3] = {(x - K[2]) / K[0] * d, (y - K[5]) / K[4] * d, d};
        for (int r = 0; r < 3; ++r) {
          const float* e = p.extrinsic.f32() + f * 12 + r * 4;
          p.world_points.f32()[3 * i + r] = static_cast<float>(e[0] * cam[0] + e[1] * cam[1] + e[2] * cam[2] + e[3]);
        }
        for (int c = 0; c < 3; ++c)
          p.images.f32()[((int64_t{f} * 3 + c) * kH + y) * kW + x] = static_cast<float>((10 * c + x + y + f) / 40.0);
      }
    p.frame_names.push_back(fmt::format("{:06d}", f));
  }
  p.world_points.f32()[3 * ((1 * kH + 2) * kW + 1)] = std::nanf("");
  return h;
}

std::string temp_dir(const std::string& name) {
  const std::string d = std::string(::testing::TempDir()) + "/lingbot_export_" + name;
  std::filesystem::remove_all(d);
  return d;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// COLMAP's binary layout (colmap/base/reconstruction.cc, 3.x), read independently.
struct Reader {
  std::string bytes;
  size_t pos = 0;
  template <typename T>
  T get() {
    T v;
    EXPECT_LE(pos + sizeof(T), bytes.size());
    std::memcpy(&v, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str() {
    const size_t end = bytes.find('\0', pos);
    std::string s = bytes.substr(pos, end - pos);
    pos = end + 1;
    return s;
  }
};

}  // namespace

TEST(PointSelection, ThresholdSkipsNonFiniteAndLowConfidence) {
  const HandMade h = hand_made();
  const auto points = io::select_points(h.p, {});
  // Per frame 4 rows x 4 of the 6 columns have confidence 2 or 3; the NaN pixel has x = 1 (kept otherwise).
  EXPECT_EQ(points.size(), size_t{kFrames * kH * 4 - 1});
  for (const auto& s : points) {
    EXPECT_NE(s.x % 3, 0);
    EXPECT_FALSE(s.frame == 1 && s.x == 1 && s.y == 2);
  }
}

TEST(PointSelection, PercentileDownsampleFramesVoxelsAndLimit) {
  const HandMade h = hand_made();
  io::PointSelectionOptions o;
  o.conf_percentile = 50;  // confidences 1,2,3 in equal shares (one NaN point fewer): the median is 2
  EXPECT_EQ(io::select_points(h.p, o).size(), size_t{kFrames * kH * 4 - 1});
  o = {};
  o.conf_threshold = 0;
  o.downsample = 2;  // x in {0,2,4}, y in {0,2}
  EXPECT_EQ(io::select_points(h.p, o).size(), size_t{kFrames * 2 * 3});
  o = {};
  io::parse_frame_range("1:", kFrames, o);
  EXPECT_EQ(o.first_frame, 1);
  EXPECT_EQ(o.end_frame, kFrames);
  for (const auto& s : io::select_points(h.p, o)) EXPECT_GE(s.frame, 1);
  io::parse_frame_range(":-2", kFrames, o);
  EXPECT_EQ(o.end_frame, 1);
  EXPECT_THROW(io::parse_frame_range("2:1", kFrames, o), Error);
  o = {};
  o.max_points = 5;
  EXPECT_EQ(io::select_points(h.p, o).size(), 5u);
  o = {};
  o.voxel_size = 100;  // far larger than the scene, which may straddle a cell boundary on each axis
  const auto voxels = io::select_points(h.p, o);
  EXPECT_GE(voxels.size(), 1u);
  EXPECT_LE(voxels.size(), 8u);  // the scene spans less than one voxel per axis: at most 2^3 cells
  for (const auto& s : voxels) EXPECT_EQ(s.confidence, 3.0f);  // each cell keeps its most confident point
}

TEST(ColmapWriter, BinaryModelHoldsTheInversePosesAndConsistentTracks) {
  const HandMade h = hand_made();
  const auto points = io::select_points(h.p, {});
  const std::string dir = temp_dir("colmap");
  const std::vector<std::string> names = {"a.png", "b.png", "c.png"};
  const io::ColmapModelStats stats = io::write_colmap_model(h.p, points, names, dir, false);
  EXPECT_LT(stats.mean_reprojection_error, 1e-5);

  Reader cams{slurp(dir + "/cameras.bin")};
  ASSERT_EQ(cams.get<uint64_t>(), uint64_t{kFrames});
  for (int f = 0; f < kFrames; ++f) {
    EXPECT_EQ(cams.get<uint32_t>(), uint32_t(f + 1));
    EXPECT_EQ(cams.get<int32_t>(), 1);  // PINHOLE
    EXPECT_EQ(cams.get<uint64_t>(), uint64_t{kW});
    EXPECT_EQ(cams.get<uint64_t>(), uint64_t{kH});
    EXPECT_DOUBLE_EQ(cams.get<double>(), 5.0 + f);
    EXPECT_DOUBLE_EQ(cams.get<double>(), 6.0 + f);
    EXPECT_DOUBLE_EQ(cams.get<double>(), kW / 2.0 + 0.5);  // pixel centres at +0.5 in COLMAP
    EXPECT_DOUBLE_EQ(cams.get<double>(), kH / 2.0 + 0.5);
  }
  EXPECT_EQ(cams.pos, cams.bytes.size());

  Reader imgs{slurp(dir + "/images.bin")};
  ASSERT_EQ(imgs.get<uint64_t>(), uint64_t{kFrames});
  std::map<uint64_t, std::array<double, 3>> observed;  // point3D id -> (image id, x, y)
  for (int f = 0; f < kFrames; ++f) {
    EXPECT_EQ(imgs.get<uint32_t>(), uint32_t(f + 1));
    double q[4], t[3];
    for (double& v : q) v = imgs.get<double>();
    for (double& v : t) v = imgs.get<double>();
    EXPECT_EQ(imgs.get<uint32_t>(), uint32_t(f + 1));
    EXPECT_EQ(imgs.str(), names[f]);
    // (qw, qx, qy, qz) as a matrix must be R^T, and t = -R^T c.
    const double w = q[0], x = q[1], y = q[2], z = q[3];
    EXPECT_NEAR(w * w + x * x + y * y + z * z, 1.0, 1e-9);
    const Mat3d Rq = {{{1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)},
                       {2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)},
                       {2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)}}};
    for (int r = 0; r < 3; ++r) {
      double expected_t = 0;
      for (int c = 0; c < 3; ++c) {
        EXPECT_NEAR(Rq[r][c], h.R[f][c][r], 1e-6) << f;
        expected_t -= h.R[f][c][r] * h.t[f][c];
      }
      EXPECT_NEAR(t[r], expected_t, 1e-6) << f;
    }
    const uint64_t n = imgs.get<uint64_t>();
    for (uint64_t k = 0; k < n; ++k) {
      const double px = imgs.get<double>(), py = imgs.get<double>();
      const uint64_t id = imgs.get<uint64_t>();
      observed[id] = {double(f + 1), px, py};
    }
  }
  EXPECT_EQ(imgs.pos, imgs.bytes.size());

  Reader pts{slurp(dir + "/points3D.bin")};
  ASSERT_EQ(pts.get<uint64_t>(), points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const uint64_t id = pts.get<uint64_t>();
    double X[3];
    for (double& v : X) v = pts.get<double>();
    for (int c = 0; c < 3; ++c) pts.get<uint8_t>();
    EXPECT_LT(pts.get<double>(), 1e-4);
    ASSERT_EQ(pts.get<uint64_t>(), 1u);
    const uint32_t image_id = pts.get<uint32_t>();
    pts.get<uint32_t>();
    ASSERT_TRUE(observed.count(id));
    EXPECT_EQ(observed[id][0], image_id);
    // Project with the hand-made camera: K (R^T (X - c)) + 0.5 must hit the recorded pixel.
    const int f = static_cast<int>(image_id) - 1;
    double cam[3] = {0, 0, 0};
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) cam[r] += h.R[f][c][r] * (X[c] - h.t[f][c]);
    const double u = (5.0 + f) * cam[0] / cam[2] + kW / 2.0 + 0.5, v = (6.0 + f) * cam[1] / cam[2] + kH / 2.0 + 0.5;
    EXPECT_NEAR(u, observed[id][1], 1e-4);
    EXPECT_NEAR(v, observed[id][2], 1e-4);
  }
  EXPECT_EQ(pts.pos, pts.bytes.size());
}

TEST(Exporters, NerfstudioTransformsAreOpenGlCameraToWorld) {
  const HandMade h = hand_made();
  io::ExportOptions o;
  o.formats = {"nerfstudio"};
  o.out_dir = temp_dir("nerfstudio");
  io::export_predictions(h.p, o);
  const auto doc = nlohmann::json::parse(slurp(o.out_dir + "/transforms.json"));
  ASSERT_EQ(doc["frames"].size(), size_t{kFrames});
  for (int f = 0; f < kFrames; ++f) {
    const auto& fr = doc["frames"][f];
    EXPECT_EQ(fr["file_path"], fmt::format("images/{:06d}.png", f));
    EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/" + fr["file_path"].get<std::string>()));
    EXPECT_DOUBLE_EQ(fr["fl_x"].get<double>(), 5.0 + f);
    EXPECT_EQ(fr["w"], kW);
    for (int r = 0; r < 3; ++r) {
      // OpenGL camera axes: y and z of the OpenCV camera negated.
      EXPECT_NEAR(fr["transform_matrix"][r][0].get<double>(), h.R[f][r][0], 1e-6);
      EXPECT_NEAR(fr["transform_matrix"][r][1].get<double>(), -h.R[f][r][1], 1e-6);
      EXPECT_NEAR(fr["transform_matrix"][r][2].get<double>(), -h.R[f][r][2], 1e-6);
      EXPECT_NEAR(fr["transform_matrix"][r][3].get<double>(), h.t[f][r], 1e-6);
    }
  }
  const std::string ply = slurp(o.out_dir + "/sparse_pc.ply");
  EXPECT_NE(ply.find(fmt::format("element vertex {}\n", kFrames * kH * 4 - 1)), std::string::npos);
}

TEST(DepthImages, EncodingIsMillimetresAndMonotonicConfidence) {
  EXPECT_EQ(io::depth_to_png16(1.2344f), 1234);
  EXPECT_EQ(io::depth_to_png16(0.0f), 0);
  EXPECT_EQ(io::depth_to_png16(-1.0f), 0);
  EXPECT_EQ(io::depth_to_png16(std::nanf("")), 0);
  EXPECT_EQ(io::depth_to_png16(INFINITY), 0);
  EXPECT_EQ(io::depth_to_png16(100.0f), 65535);
  EXPECT_EQ(io::confidence_to_png8(1.0f), 0);
  EXPECT_EQ(io::confidence_to_png8(2.0f), 128);  // 255 * 0.5 = 127.5 -> 128
  EXPECT_EQ(io::confidence_to_png8(1e9f), 255);
}

TEST(AtomicFile, NothingUnderTheFinalNameUntilCommitted) {
  const std::string dir = temp_dir("atomic");
  io::make_dirs(dir + "/a/b");
  {
    io::AtomicFile f(dir + "/a/b/x.txt");
    f.write("half");
    EXPECT_FALSE(std::filesystem::exists(dir + "/a/b/x.txt"));
  }  // abandoned: removed
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/a/b"));
  io::AtomicFile g(dir + "/a/b/x.txt");
  g.write("whole");
  g.commit();
  EXPECT_EQ(slurp(dir + "/a/b/x.txt"), "whole");
  std::ofstream(dir + "/file") << "x";
  EXPECT_THROW(io::make_dirs(dir + "/file/sub"), Error);
  EXPECT_THROW(io::AtomicFile(dir + "/file/y"), Error);
}

TEST(Exporters, EveryFormatAtOnceLeavesOnlyFinishedFiles) {
  const HandMade h = hand_made();
  io::ExportOptions o;
  o.formats = io::parse_export_formats("colmap,nerfstudio,glb,depth,ply");
  o.out_dir = temp_dir("all");
  const io::ExportSummary s = io::export_predictions(h.p, o);
  EXPECT_EQ(s.points, kFrames * kH * 4 - 1);
  EXPECT_LT(s.colmap_mean_reprojection_error, 1e-5);
  for (const char* f : {"sparse/0/cameras.bin", "sparse/0/images.bin", "sparse/0/points3D.bin", "transforms.json",
                        "sparse_pc.ply", "scene.glb", "points.ply", "depth_scale.json", "depth/000002.png",
                        "depth_conf/000002.png", "images/000002.png"})
    EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/" + f)) << f;
  for (const auto& e : std::filesystem::recursive_directory_iterator(o.out_dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  const std::string glb = slurp(o.out_dir + "/scene.glb");
  ASSERT_GE(glb.size(), 12u);
  EXPECT_EQ(glb.substr(0, 4), "glTF");
  uint32_t length = 0;
  std::memcpy(&length, glb.data() + 8, 4);
  EXPECT_EQ(length, glb.size());
  EXPECT_THROW(io::parse_export_formats("glb,obj"), Error);
}
