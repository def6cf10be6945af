#include "output/point_cloud_writer.h"

#include "core/error.h"
#include "output/atomic_file.h"
#include "output/point_selection.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

namespace lingbot::io {

namespace {
constexpr size_t kRecord = 3 * sizeof(float) + 3;  // x y z (float32), r g b (uint8)
}

PlyWriter::PlyWriter(const std::string& path) : path_(path), temp_path_(path + ".points.tmp") {
  temp_ = std::fopen(temp_path_.c_str(), "w+b");
  if (!temp_) fail("{}: cannot create temporary file: {}", temp_path_, std::strerror(errno));
}

PlyWriter::~PlyWriter() {
  if (temp_) std::fclose(temp_);
  std::remove(temp_path_.c_str());
}

void PlyWriter::add(float x, float y, float z, uint8_t r, uint8_t g, uint8_t b) {
  if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z)) {
    ++skipped_;
    return;
  }
  unsigned char rec[kRecord];
  std::memcpy(rec, &x, 4);
  std::memcpy(rec + 4, &y, 4);
  std::memcpy(rec + 8, &z, 4);
  rec[12] = r;
  rec[13] = g;
  rec[14] = b;
  if (std::fwrite(rec, 1, kRecord, temp_) != kRecord) fail("{}: write failed: {}", temp_path_, std::strerror(errno));
  ++count_;
}

void PlyWriter::finish() {
  FILE* out = std::fopen(path_.c_str(), "wb");
  if (!out) fail("{}: cannot create: {}", path_, std::strerror(errno));
  std::fprintf(out,
               "ply\nformat binary_little_endian 1.0\ncomment lingbot-map point cloud\n"
               "element vertex %lld\nproperty float x\nproperty float y\nproperty float z\n"
               "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n",
               static_cast<long long>(count_));
  std::fflush(temp_);
  std::rewind(temp_);
  std::vector<char> buf(size_t{8} << 20);
  size_t n;
  bool ok = true;
  while ((n = std::fread(buf.data(), 1, buf.size(), temp_)) > 0) ok = ok && std::fwrite(buf.data(), 1, n, out) == n;
  ok = std::fclose(out) == 0 && ok;
  if (!ok) fail("{}: write failed: {}", path_, std::strerror(errno));
}

void write_points_ply(const std::string& path, const std::vector<SelectedPoint>& points) {
  AtomicFile out(path);
  out.write(fmt::format("ply\nformat binary_little_endian 1.0\ncomment lingbot-map point cloud\n"
                        "element vertex {}\nproperty float x\nproperty float y\nproperty float z\n"
                        "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n",
                        points.size()));
  std::vector<unsigned char> records(points.size() * kRecord);
  for (size_t i = 0; i < points.size(); ++i) {
    std::memcpy(&records[i * kRecord], points[i].xyz, 12);
    std::memcpy(&records[i * kRecord + 12], points[i].rgb, 3);
  }
  out.write(records.data(), records.size());
  out.commit();
}

}  // namespace lingbot::io
