// TumTrajectoryWriter: a pose that is not finite leaves no line; the others
// are read back here as text and compared with the poses given.
#include "output/trajectory_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace lingbot;

TEST(TumTrajectoryWriter, LeavesOutPosesThatAreNotFinite) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "lingbot_tum_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "trajectory.txt").string();
  using Pose = std::array<std::array<double, 4>, 3>;
  const Pose identity_at{{{1, 0, 0, 1.5}, {0, 1, 0, -2}, {0, 0, 1, 3}}};
  Pose broken = identity_at;
  broken[1][3] = NAN;
  {
    io::TumTrajectoryWriter w(path);
    w.add(0, identity_at);
    w.add(1, broken);
    w.add(2, identity_at);
    EXPECT_EQ(w.skipped_non_finite(), 1);
    w.close();
  }
  std::ifstream in(path);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') rows.push_back(line);
  ASSERT_EQ(rows.size(), 2u);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::istringstream row(rows[i]);
    double t, x, y, z, qx, qy, qz, qw;
    ASSERT_TRUE(row >> t >> x >> y >> z >> qx >> qy >> qz >> qw) << rows[i];
    EXPECT_EQ(t, i == 0 ? 0.0 : 2.0);
    EXPECT_EQ(x, 1.5);
    EXPECT_EQ(y, -2.0);
    EXPECT_EQ(z, 3.0);
    EXPECT_EQ(qw, 1.0);
  }
  std::filesystem::remove_all(dir);
}
