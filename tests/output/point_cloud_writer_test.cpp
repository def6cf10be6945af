// PlyWriter: points with a non-finite coordinate never reach the file. The
// PLY is parsed here byte by byte (header count, then 15-byte records), not
// with the writer's code.
#include "output/point_cloud_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace lingbot;

TEST(PlyWriter, SkipsPointsWithNonFiniteCoordinates) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "lingbot_ply_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "points.ply").string();
  {
    io::PlyWriter ply(path);
    ply.add(1.f, 2.f, 3.f, 10, 20, 30);
    ply.add(NAN, 0.f, 0.f, 1, 1, 1);
    ply.add(0.f, INFINITY, 0.f, 1, 1, 1);
    ply.add(0.f, 0.f, -INFINITY, 1, 1, 1);
    ply.add(-4.f, 5.5f, 6.f, 40, 50, 60);
    EXPECT_EQ(ply.points(), 2);
    EXPECT_EQ(ply.skipped_non_finite(), 3);
    ply.finish();
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string end = "end_header\n";
  const size_t body = bytes.find(end);
  ASSERT_NE(body, std::string::npos);
  EXPECT_NE(bytes.substr(0, body).find("element vertex 2\n"), std::string::npos) << bytes.substr(0, body);
  ASSERT_EQ(bytes.size() - (body + end.size()), 2u * 15u);  // the header's count matches the body
  const char* rec = bytes.data() + body + end.size();
  float second[3];
  std::memcpy(second, rec + 15, sizeof second);
  EXPECT_EQ(second[0], -4.f);
  EXPECT_EQ(second[1], 5.5f);
  EXPECT_EQ(second[2], 6.f);
  EXPECT_EQ(static_cast<unsigned char>(rec[15 + 12]), 40);
  std::filesystem::remove_all(dir);
}
