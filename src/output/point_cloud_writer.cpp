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

// The header for `count` points, padded by its comment line to a length
// that any count fits (20 digits), so the final one overwrites the first.
std::string ply_header(int64_t count) {
  const std::string head = "ply\nformat binary_little_endian 1.0\ncomment lingbot-map point cloud";
  const std::string tail = fmt::format(
      "\nelement vertex {}\nproperty float x\nproperty float y\nproperty float z\n"
      "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n",
      count);
  constexpr size_t kLength = 256;
  return head + std::string(kLength - head.size() - tail.size(), ' ') + tail;
}

}  // namespace

PlyWriter::PlyWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path_.c_str(), "w+b");
  if (!file_) fail("{}: cannot create: {}", path_, std::strerror(errno));
  const std::string header = ply_header(0);
  if (std::fwrite(header.data(), 1, header.size(), file_) != header.size())
    fail("{}: write failed: {}", path_, std::strerror(errno));
}

PlyWriter::~PlyWriter() {
  if (!file_) return;
  std::fclose(file_);
  std::remove(path_.c_str());
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
  if (std::fwrite(rec, 1, kRecord, file_) != kRecord) fail("{}: write failed: {}", path_, std::strerror(errno));
  ++count_;
}

void PlyWriter::finish() {
  const std::string header = ply_header(count_);
  bool ok = std::fflush(file_) == 0 && std::fseek(file_, 0, SEEK_SET) == 0 &&
            std::fwrite(header.data(), 1, header.size(), file_) == header.size() && std::fflush(file_) == 0;
  const int e = errno;
  ok = std::fclose(file_) == 0 && ok;
  file_ = nullptr;
  if (!ok) {
    std::remove(path_.c_str());
    fail("{}: write failed: {}", path_, std::strerror(e ? e : errno));
  }
}

void write_points_ply(const std::string& path, const std::vector<SelectedPoint>& points) {
  AtomicFile out(path);
  out.write(ply_header(static_cast<int64_t>(points.size())));
  std::vector<unsigned char> records(points.size() * kRecord);
  for (size_t i = 0; i < points.size(); ++i) {
    std::memcpy(&records[i * kRecord], points[i].xyz, 12);
    std::memcpy(&records[i * kRecord + 12], points[i].rgb, 3);
  }
  out.write(records.data(), records.size());
  out.commit();
}

}  // namespace lingbot::io
