// NpzWriter / ArraySpool against our reader and, where available, NumPy
// itself (the format's reference implementation).
#include "output/npz_reader.h"
#include "output/npz_writer.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

using namespace lingbot;

namespace {

std::string temp_path(const std::string& name) {
  return std::string(::testing::TempDir()) + "/lingbot_npz_" + name;
}

bool numpy_available() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

}  // namespace

TEST(Npz, RoundTripsThroughOurReader) {
  const std::string path = temp_path("roundtrip.npz");
  std::mt19937 rng(3);
  std::normal_distribution<float> n;
  Tensor a = Tensor::empty({4, 5, 3});
  for (int64_t i = 0; i < a.numel(); ++i) a.f32()[i] = n(rng);
  Tensor b = Tensor::empty({7}, DType::U8);
  for (int i = 0; i < 7; ++i) b.data_as<uint8_t>()[i] = static_cast<uint8_t>(i * 37);
  {
    io::NpzWriter w(path);
    w.add("a", a);
    io::ArraySpool spool("c", DType::F32, {2, 3}, path + ".spool");
    for (int k = 0; k < 5; ++k) {
      Tensor item = Tensor::empty({2, 3});
      for (int i = 0; i < 6; ++i) item.f32()[i] = static_cast<float>(k * 10 + i);
      spool.append(item);
    }
    w.add("b", b);
    spool.copy_into(w);
    w.close();
  }
  const auto arrays = io::read_npz(path);
  ASSERT_EQ(arrays.size(), 3u);
  EXPECT_EQ(arrays.at("a").shape(), a.shape());
  EXPECT_EQ(test::max_abs_diff(arrays.at("a"), a), 0.0);
  EXPECT_EQ(arrays.at("b").dtype(), DType::U8);
  EXPECT_EQ(arrays.at("b").data_as<uint8_t>()[6], 6 * 37);
  const Tensor& c = arrays.at("c");
  EXPECT_EQ(c.shape(), (Shape{5, 2, 3}));
  EXPECT_EQ(c.f32()[4 * 6 + 5], 45.f);
}

TEST(Npz, NumpyReadsWhatWeWrite) {
  if (!numpy_available()) GTEST_SKIP() << "/usr/bin/python3 with numpy not installed";
  const std::string path = temp_path("numpy.npz");
  Tensor a = Tensor::empty({3, 2});
  for (int i = 0; i < 6; ++i) a.f32()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  {
    io::NpzWriter w(path);
    w.add("pose_enc", a);
    w.add("scalar_row", Tensor::from_vector({42.f}, {1}));
    w.close();
  }
  // NumPy checks every value and the shapes; exit status 0 means equal.
  const std::string cmd = "/usr/bin/python3 -c \"import numpy as np; z = np.load('" + path +
                          "'); a = z['pose_enc']; assert a.shape == (3, 2) and a.dtype == np.float32; "
                          "assert (a == 0.5 * np.arange(6, dtype=np.float32).reshape(3, 2) - 1).all(); "
                          "assert z['scalar_row'].tolist() == [42.0]\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Npz, ShapeAndDataMustAgree) {
  const std::string path = temp_path("bad.npz");
  io::NpzWriter w(path);
  w.begin_array("x", DType::F32, {2, 2});
  const float data[3] = {1, 2, 3};
  w.write(data, sizeof data);
  EXPECT_THROW(w.end_array(), Error);  // 12 of 16 bytes
  EXPECT_THROW(io::NpzWriter("/nonexistent-dir/x.npz"), Error);
}

TEST(Npz, CorruptArchiveIsAnError) {
  const std::string path = temp_path("corrupt.npz");
  std::ofstream(path) << "PK\x03\x04 not really a zip";
  EXPECT_THROW(io::read_npz(path), Error);
}

// Spools moved into an archive back to front, in chunks smaller than a spool
// (300,000 float items of 4 bytes: 1.2 MB, so more than one 1 MiB chunk), and
// a unicode array of names: NumPy reads every value and zipfile every CRC.
TEST(Npz, MovingSpoolsGivesTheArraysNumpyReads) {
  if (!numpy_available()) GTEST_SKIP() << "/usr/bin/python3 with numpy not installed";
  const std::string path = temp_path("moved.npz");
  io::ArraySpool big("big", DType::F32, {1000}, path + ".big");
  io::ArraySpool small("small", DType::I32, {2}, path + ".small");
  for (int k = 0; k < 300; ++k) {
    Tensor item = Tensor::empty({1000});
    for (int i = 0; i < 1000; ++i) item.f32()[i] = static_cast<float>(k * 1000 + i);
    big.append(item);
    Tensor pair = Tensor::empty({2}, DType::I32);
    pair.data_as<int32_t>()[0] = k;
    pair.data_as<int32_t>()[1] = -k;
    small.append(pair);
  }
  const std::vector<std::string> names = {"a.png", "caf\xc3\xa9.jpg", "\xe6\x97\xa5\xe6\x9c\xac", ""};
  io::write_npz_moving_spools(path, {{"big", &big, {}}, {"frames", nullptr, io::npy_strings(names)}, {"small", &small, {}}},
                              path);
  EXPECT_EQ(big.items(), 0);  // moved, not copied
  const std::string cmd = "/usr/bin/python3 -c \"import numpy as np, zipfile; assert zipfile.ZipFile('" + path +
                          "').testzip() is None; z = np.load('" + path +
                          "'); assert list(z.keys()) == ['big', 'frames', 'small']; "
                          "assert (z['big'] == np.arange(300000, dtype=np.float32).reshape(300, 1000)).all(); "
                          "assert (z['small'][:, 0] == np.arange(300)).all() and (z['small'][:, 1] == -np.arange(300)).all(); "
                          "assert z['frames'].tolist() == ['a.png', 'caf\\u00e9.jpg', '\\u65e5\\u672c', ''], z['frames']\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // Our reader: the names back as UTF-8.
  const auto arrays = io::read_npz(path);
  EXPECT_EQ(io::decode_strings(arrays.at("frames"), "frames"), names);
}
