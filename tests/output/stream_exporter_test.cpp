// The streaming side of the exporters: PointAccumulator fed frame by frame
// against a brute-force selection written here, and StreamingExporter
// writing each frame's files as the frame is added, before finish().
#include "core/error.h"
#include "output/exr_writer.h"
#include "output/point_selection.h"
#include "output/stream_exporter.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <tuple>

using namespace lingbot;

namespace {

constexpr int kH = 5, kW = 7, kFrames = 6;

struct Frames {
  std::vector<float> xyz, conf, rgb;  // per frame [H*W*3], [H*W], [3*H*W], frames back to back
};

// Points on a coarse lattice so that voxels hold several; confidences from
// a few levels so that ties happen; a NaN here and there.
Frames random_frames(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> cell(-3, 3), level(0, 4);
  std::uniform_real_distribution<float> unit(0, 1);
  Frames f;
  for (int i = 0; i < kFrames * kH * kW; ++i) {
    for (int a = 0; a < 3; ++a) f.xyz.push_back(0.25f * static_cast<float>(cell(rng)) + 0.01f * unit(rng));
    f.conf.push_back(i % 17 == 5 ? NAN : 1.0f + 0.5f * static_cast<float>(level(rng)));
  }
  for (int i = 0; i < kFrames * 3 * kH * kW; ++i) f.rgb.push_back(unit(rng));
  return f;
}

using Key = std::tuple<int, int, int>;  // frame, y, x

// The documented selection, by brute force.
std::vector<Key> naive(const Frames& f, const io::PointSelectionOptions& o) {
  struct P {
    Key key;
    float xyz[3], conf;
  };
  std::vector<P> all;
  const int end = o.end_frame < 0 ? kFrames : o.end_frame;
  for (int fr = o.first_frame; fr < end; ++fr)
    for (int y = 0; y < kH; y += o.downsample)
      for (int x = 0; x < kW; x += o.downsample) {
        const int i = (fr * kH + y) * kW + x;
        const float* q = &f.xyz[3 * static_cast<size_t>(i)];
        if (!std::isfinite(f.conf[i])) continue;
        all.push_back({{fr, y, x}, {q[0], q[1], q[2]}, f.conf[i]});
      }
  std::vector<P> kept;
  if (o.conf_percentile >= 0) {
    std::vector<double> c;
    for (const P& p : all) c.push_back(p.conf);
    std::sort(c.begin(), c.end());
    const double rank = o.conf_percentile / 100 * (c.size() - 1);
    const size_t lo = static_cast<size_t>(rank), hi = std::min(lo + 1, c.size() - 1);
    const double cut = c[lo] + (rank - lo) * (c[hi] - c[lo]);
    for (const P& p : all) if (p.conf >= cut) kept.push_back(p);
  } else {
    for (const P& p : all) if (p.conf > o.conf_threshold) kept.push_back(p);
  }
  if (o.voxel_size > 0) {
    auto voxel = [&](const P& p) {
      return std::make_tuple(std::floor(p.xyz[0] / o.voxel_size), std::floor(p.xyz[1] / o.voxel_size),
                             std::floor(p.xyz[2] / o.voxel_size));
    };
    std::vector<P> thinned;
    for (size_t i = 0; i < kept.size(); ++i) {
      bool best = true;
      for (size_t j = 0; j < kept.size() && best; ++j)
        if (j != i && voxel(kept[j]) == voxel(kept[i]) &&
            (kept[j].conf > kept[i].conf || (kept[j].conf == kept[i].conf && j < i)))
          best = false;
      if (best) thinned.push_back(kept[i]);
    }
    kept = thinned;
  }
  std::vector<Key> keys;
  for (const P& p : kept) keys.push_back(p.key);
  if (o.max_points > 0 && static_cast<int64_t>(keys.size()) > o.max_points) {
    std::vector<Key> even;
    for (int64_t i = 0; i < o.max_points; ++i)
      even.push_back(keys[static_cast<size_t>(static_cast<double>(i) * keys.size() / o.max_points)]);
    keys = even;
  }
  return keys;
}

std::vector<Key> streamed(const Frames& f, const io::PointSelectionOptions& o) {
  io::PointAccumulator acc(o);
  const int plane = kH * kW;
  for (int fr = 0; fr < kFrames; ++fr)
    acc.add_frame(fr, kH, kW, &f.xyz[3 * static_cast<size_t>(fr * plane)], &f.conf[static_cast<size_t>(fr * plane)],
                  &f.rgb[3 * static_cast<size_t>(fr * plane)]);
  std::vector<Key> keys;
  for (const io::SelectedPoint& s : acc.finish()) keys.emplace_back(s.frame, s.y, s.x);
  return keys;
}

std::string temp_dir(const std::string& name) {
  const std::string d = std::string(::testing::TempDir()) + "/lingbot_stream_exporter_" + name + "_" +
                        std::to_string(getpid());
  std::filesystem::remove_all(d);
  return d;
}

}  // namespace

TEST(PointAccumulator, FrameByFrameGivesTheBruteForceSelection) {
  for (unsigned seed : {1u, 2u, 3u}) {
    const Frames f = random_frames(seed);
    std::vector<io::PointSelectionOptions> cases(7);
    cases[1].voxel_size = 0.5;
    cases[2].voxel_size = 0.25, cases[2].max_points = 11;
    cases[3].max_points = 13;
    cases[4].conf_percentile = 40, cases[4].voxel_size = 0.5;
    cases[5].downsample = 2, cases[5].first_frame = 1, cases[5].end_frame = 4, cases[5].voxel_size = 0.75;
    cases[6].conf_threshold = 2.0, cases[6].voxel_size = 1.0;
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto want = naive(f, cases[c]);
      EXPECT_FALSE(want.empty()) << "case " << c;
      EXPECT_EQ(streamed(f, cases[c]), want) << "seed " << seed << " case " << c;
    }
  }
}

TEST(PointAccumulator, WithVoxelsItHoldsOnePointPerOccupiedVoxel) {
  const Frames f = random_frames(4);
  io::PointSelectionOptions o;
  o.voxel_size = 1.0;  // the lattice spans [-0.75, 0.76]: at most 2 cells per axis
  io::PointAccumulator acc(o);
  const int plane = kH * kW;
  for (int fr = 0; fr < kFrames; ++fr) {
    acc.add_frame(fr, kH, kW, &f.xyz[3 * static_cast<size_t>(fr * plane)], &f.conf[static_cast<size_t>(fr * plane)],
                  &f.rgb[3 * static_cast<size_t>(fr * plane)]);
    EXPECT_LE(acc.held(), 8);  // memory follows the cloud, not the frames
  }
}

TEST(StreamingExporter, EachFramesFilesExistBeforeTheStreamEnds) {
  const Frames f = random_frames(5);
  io::ExportOptions o;
  o.formats = io::parse_export_formats("colmap,nerfstudio,glb,depth,ply");
  o.out_dir = temp_dir("frames");
  o.points.conf_threshold = 1.0;
  io::StreamingExporter exporter(o, kH, kW);
  const float K[9] = {5, 0, 3, 0, 5, 2, 0, 0, 1};
  const float c2w[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  std::vector<float> depth(kH * kW, 1.5f);
  const int plane = kH * kW;
  namespace fs = std::filesystem;
  for (int fr = 0; fr < kFrames; ++fr) {
    const std::string name = "frame" + std::to_string(fr);
    exporter.add({name, c2w, K, depth.data(), &f.conf[static_cast<size_t>(fr * plane)],
                  &f.xyz[3 * static_cast<size_t>(fr * plane)], &f.rgb[3 * static_cast<size_t>(fr * plane)]});
    for (const std::string file : {"depth/" + name + ".png", "depth_conf/" + name + ".png", "images/" + name + ".png"})
      EXPECT_TRUE(fs::exists(o.out_dir + "/" + file)) << file << " after frame " << fr;
    EXPECT_FALSE(fs::exists(o.out_dir + "/depth/frame" + std::to_string(fr + 1) + ".png"));
    for (const char* file : {"scene.glb", "transforms.json", "sparse/0/cameras.bin", "sparse/0/images.bin",
                             "depth_scale.json", "points.ply"})
      EXPECT_FALSE(fs::exists(o.out_dir + "/" + file)) << file << " before finish()";
  }
  int spools = 0;  // the per-frame entries of cameras.bin and transforms.json, waiting for their headers
  for (const auto& e : fs::recursive_directory_iterator(o.out_dir))
    spools += e.path().filename().string().find(".part") != std::string::npos;
  EXPECT_EQ(spools, 2);
  const io::ExportSummary s = exporter.finish();
  EXPECT_GT(s.points, 0);
  for (const char* file : {"scene.glb", "transforms.json", "sparse/0/cameras.bin", "sparse/0/images.bin",
                           "depth_scale.json", "points.ply"})
    EXPECT_TRUE(fs::exists(o.out_dir + "/" + file)) << file;
  for (const auto& e : fs::recursive_directory_iterator(o.out_dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find(".part"), std::string::npos) << e.path();
  }
}

TEST(StreamingExporter, AnUnfinishedExportLeavesOnlyWholePerFrameFiles) {
  const Frames f = random_frames(6);
  io::ExportOptions o;
  o.formats = io::parse_export_formats("colmap,nerfstudio,depth");
  o.out_dir = temp_dir("unfinished");
  {
    io::StreamingExporter exporter(o, kH, kW);
    const float K[9] = {5, 0, 3, 0, 5, 2, 0, 0, 1};
    const float c2w[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    std::vector<float> depth(kH * kW, 1.5f);
    exporter.add({"a", c2w, K, depth.data(), f.conf.data(), f.xyz.data(), f.rgb.data()});
  }  // an error or a signal: no finish()
  namespace fs = std::filesystem;
  std::set<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(o.out_dir))
    if (e.is_regular_file()) left.insert(fs::relative(e.path(), o.out_dir).string());
  EXPECT_EQ(left, (std::set<std::string>{"depth/a.png", "depth_conf/a.png", "images/a.png"}));
}

// OpenEXR keeps a block raw where zlib does not shrink it, so whether a
// model's depth map compresses depends on its values; a smooth image always
// does: the ZIP path, decoded by the reader in tests/tools, exactly.
TEST(ExrWriter, ZipCompressesASmoothDepthImageAndItReadsBackExactly) {
  if (!io::exr_supported()) GTEST_SKIP() << "built without OpenEXR";
  constexpr int kWidth = 64, kHeight = 48;
  std::vector<float> depth(kWidth * kHeight);
  for (int y = 0; y < kHeight; ++y)
    for (int x = 0; x < kWidth; ++x) depth[y * kWidth + x] = 2.0f + 0.25f * static_cast<float>(y / 8);
  const std::string dir = temp_dir("exr_zip");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/smooth.exr";
  io::write_exr_depth(path, depth.data(), kWidth, kHeight);
  const test::CommandResult r = test::run_shell(
      "/usr/bin/python3 -c \"import sys, json; sys.path.insert(0, '" + std::string(LINGBOT_TEST_TOOLS_DIR) +
      "'); import check_depth_exr as c; names, img = c.read_exr('" + path +
      "'); print(json.dumps([c.zip_blocks, [float(v) for v in img[0].ravel()]]))\"");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto got = nlohmann::json::parse(r.output);
  EXPECT_EQ(got[0].get<int>(), (kHeight + 15) / 16) << "every 16-line block ZIP-compressed";
  ASSERT_EQ(got[1].size(), depth.size());
  for (size_t i = 0; i < depth.size(); ++i) ASSERT_EQ(got[1][i].get<float>(), depth[i]) << "pixel " << i;
}

TEST(StreamingExporter, DepthExrHoldsTheFloatsOrTheBuildSaysItCannot) {
  io::ExportOptions o;
  o.formats = {"depth"};
  o.out_dir = temp_dir("exr");
  o.depth_exr = true;
  if (!io::exr_supported()) {
    try {
      io::StreamingExporter exporter(o, kH, kW);
      ADD_FAILURE() << "--depth-exr accepted by a build without OpenEXR";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("built without OpenEXR"), std::string::npos) << e.what();
    }
    return;
  }
  const int plane = kH * kW;
  std::vector<float> depth(plane), conf(plane, 2.0f), xyz(3 * plane, 0.0f), rgb(3 * plane, 0.5f), want(plane);
  for (int i = 0; i < plane; ++i) depth[i] = want[i] = 0.5f + 0.37f * static_cast<float>(i);
  depth[3] = NAN, want[3] = 0;    // not finite: invalid
  depth[4] = -1.0f, want[4] = 0;  // not positive: invalid
  conf[5] = 0, want[5] = 0;       // sky
  const float K[9] = {5, 0, 3, 0, 5, 2, 0, 0, 1};
  const float c2w[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  io::StreamingExporter exporter(o, kH, kW);
  exporter.add({"f", c2w, K, depth.data(), conf.data(), xyz.data(), rgb.data()});
  exporter.finish();
  // Decoded by the reader of the OpenEXR layout in tests/tools (zlib and numpy, not OpenEXR).
  const test::CommandResult r = test::run_shell(
      "/usr/bin/python3 -c \"import sys, json; sys.path.insert(0, '" + std::string(LINGBOT_TEST_TOOLS_DIR) +
      "'); import check_depth_exr as c; names, img = c.read_exr('" + o.out_dir +
      "/depth_exr/f.exr'); print(json.dumps([names, list(img.shape), [repr(float(v)) for v in img[0].ravel()]]))\"");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto got = nlohmann::json::parse(r.output);
  EXPECT_EQ(got[0], nlohmann::json::array({"Z"}));
  EXPECT_EQ(got[1], nlohmann::json::array({1, kH, kW}));
  ASSERT_EQ(got[2].size(), size_t(plane));
  for (int i = 0; i < plane; ++i) EXPECT_EQ(std::stof(got[2][i].get<std::string>()), want[i]) << "pixel " << i;
}
