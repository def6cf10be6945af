// Coloured point clouds as binary little-endian PLY, streamed: points are
// appended frame by frame behind a header of fixed length, and finish()
// rewrites that header with the final count in place (a comment line pads it),
// so the cloud is never copied and needs no more disk than its own size.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lingbot::io {

struct SelectedPoint;

class PlyWriter {
 public:
  explicit PlyWriter(const std::string& path);  // creates or truncates `path`
  ~PlyWriter();                                 // not finished: `path` is removed
  PlyWriter(const PlyWriter&) = delete;
  PlyWriter& operator=(const PlyWriter&) = delete;

  // A point with a non-finite coordinate is not written (counted instead):
  // a PLY reader would take NaN for a position.
  void add(float x, float y, float z, uint8_t r, uint8_t g, uint8_t b);
  int64_t points() const { return count_; }
  int64_t skipped_non_finite() const { return skipped_; }
  void finish();  // completes `path`; throws on I/O errors

 private:
  std::string path_;
  FILE* file_ = nullptr;
  int64_t count_ = 0;
  int64_t skipped_ = 0;
};

// A whole selection (export's --format ply, nerfstudio's sparse_pc.ply) in
// the same layout, written under a temporary name and renamed into place.
void write_points_ply(const std::string& path, const std::vector<SelectedPoint>& points);

}  // namespace lingbot::io
