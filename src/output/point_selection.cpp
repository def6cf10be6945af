#include "output/point_selection.h"

#include "core/error.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace lingbot::io {

void parse_frame_range(const std::string& text, int frames, PointSelectionOptions& o) {
  const size_t colon = text.find(':');
  LB_CHECK(colon != std::string::npos, "--frames {}: expected A:B (either side may be empty)", text);
  auto bound = [&](const std::string& s, int if_empty) {
    if (s.empty()) return if_empty;
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LB_CHECK(used == s.size() && used > 0, "--frames {}: '{}' is not a frame index", text, s);
    return std::clamp(v < 0 ? v + frames : v, 0, frames);
  };
  o.first_frame = bound(text.substr(0, colon), 0);
  o.end_frame = bound(text.substr(colon + 1), frames);
  LB_CHECK(o.first_frame < o.end_frame, "--frames {}: selects no frame of {}", text, frames);
}

namespace {

// The cut of --conf-percentile: numpy.percentile's default (linear between the two nearest ranks).
double percentile_cut(const std::vector<SelectedPoint>& points, double percentile) {
  std::vector<float> c(points.size());
  for (size_t i = 0; i < points.size(); ++i) c[i] = points[i].confidence;
  std::sort(c.begin(), c.end());
  const double rank = percentile / 100.0 * static_cast<double>(c.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank)), hi = std::min(lo + 1, c.size() - 1);
  return c[lo] + (rank - static_cast<double>(lo)) * (double{c[hi]} - c[lo]);
}

int64_t voxel_of(float coordinate, double voxel_size) {
  return static_cast<int64_t>(std::floor(double{coordinate} / voxel_size));
}

// One point per occupied voxel, the most confident (ties: the earlier), in
// the points' order. Sorting (voxel, index) pairs rather than hashing: one
// pass over memory in order, which matters at millions of points.
std::vector<SelectedPoint> thin_by_voxels(const std::vector<SelectedPoint>& points, double voxel_size) {
  struct Cell {
    std::array<int64_t, 3> voxel;
    uint32_t index;
  };
  std::vector<Cell> cells(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    for (int a = 0; a < 3; ++a) cells[i].voxel[a] = voxel_of(points[i].xyz[a], voxel_size);
    cells[i].index = static_cast<uint32_t>(i);
  }
  std::sort(cells.begin(), cells.end(), [](const Cell& a, const Cell& b) {
    return a.voxel != b.voxel ? a.voxel < b.voxel : a.index < b.index;
  });
  std::vector<uint32_t> kept;
  for (size_t i = 0; i < cells.size();) {
    uint32_t best = cells[i].index;
    size_t j = i + 1;
    for (; j < cells.size() && cells[j].voxel == cells[i].voxel; ++j)
      if (points[cells[j].index].confidence > points[best].confidence) best = cells[j].index;
    kept.push_back(best);
    i = j;
  }
  std::sort(kept.begin(), kept.end());  // back in frame / pixel order
  std::vector<SelectedPoint> thinned(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) thinned[i] = points[kept[i]];
  return thinned;
}

bool before(const SelectedPoint& a, const SelectedPoint& b) {
  return a.frame != b.frame ? a.frame < b.frame : a.y != b.y ? a.y < b.y : a.x < b.x;
}

}  // namespace

size_t PointAccumulator::VoxelHash::operator()(const VoxelKey& k) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the three cells
  for (int64_t v : k.v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

PointAccumulator::PointAccumulator(PointSelectionOptions options) : o_(options) {
  LB_CHECK(o_.conf_percentile <= 100, "--conf-percentile {}: must lie in [0, 100]", o_.conf_percentile);
}

int64_t PointAccumulator::held() const { return static_cast<int64_t>(points_.size() + voxels_.size()); }

void PointAccumulator::keep(const SelectedPoint& s) {
  if (o_.voxel_size > 0 && !defer_confidence()) {
    const VoxelKey key{{voxel_of(s.xyz[0], o_.voxel_size), voxel_of(s.xyz[1], o_.voxel_size),
                        voxel_of(s.xyz[2], o_.voxel_size)}};
    auto [it, inserted] = voxels_.try_emplace(key, s);
    if (!inserted && s.confidence > it->second.confidence) it->second = s;  // ties keep the earlier point
    return;
  }
  points_.push_back(s);
}

void PointAccumulator::add_frame(int f, int H, int W, const float* xyz, const float* conf, const float* images) {
  LB_CHECK(!finished_, "PointAccumulator: add_frame() after finish()");
  if (f < o_.first_frame || (o_.end_frame >= 0 && f >= o_.end_frame)) return;
  const int step = std::max(1, o_.downsample);
  const int64_t plane = int64_t{H} * W;
  for (int y = 0; y < H; y += step) {
    for (int x = 0; x < W; x += step) {
      const int64_t i = int64_t{y} * W + x;
      const float* q = xyz + 3 * i;
      if (!std::isfinite(q[0]) || !std::isfinite(q[1]) || !std::isfinite(q[2]) || !std::isfinite(conf[i])) continue;
      if (!defer_confidence() && !(conf[i] > o_.conf_threshold)) continue;
      SelectedPoint s{{q[0], q[1], q[2]}, {}, conf[i], f, x, y};
      for (int c = 0; c < 3; ++c) s.rgb[c] = color_byte(images[c * plane + i]);
      keep(s);
    }
  }
}

std::vector<SelectedPoint> PointAccumulator::finish() {
  LB_CHECK(!finished_, "PointAccumulator: finish() twice");
  finished_ = true;
  std::vector<SelectedPoint> points = std::move(points_);
  if (defer_confidence()) {
    if (!points.empty()) {
      const double cut = percentile_cut(points, o_.conf_percentile);
      std::erase_if(points, [&](const SelectedPoint& s) { return !(s.confidence >= cut); });
    }
    if (o_.voxel_size > 0) points = thin_by_voxels(points, o_.voxel_size);
  } else if (o_.voxel_size > 0) {
    points.reserve(voxels_.size());
    for (const auto& [key, s] : voxels_) points.push_back(s);
    voxels_.clear();
    std::sort(points.begin(), points.end(), before);
  }
  if (o_.max_points > 0 && static_cast<int64_t>(points.size()) > o_.max_points) {
    std::vector<SelectedPoint> kept(static_cast<size_t>(o_.max_points));
    const double stride = static_cast<double>(points.size()) / static_cast<double>(o_.max_points);
    for (size_t i = 0; i < kept.size(); ++i) kept[i] = points[static_cast<size_t>(static_cast<double>(i) * stride)];
    points = std::move(kept);
  }
  return points;
}

std::vector<SelectedPoint> select_points(const Predictions& p, const PointSelectionOptions& o) {
  PointAccumulator points(o);
  const int64_t plane = int64_t{p.height} * p.width;
  const int end = o.end_frame < 0 ? p.frames : std::min(o.end_frame, p.frames);
  for (int f = std::max(0, o.first_frame); f < end; ++f)
    points.add_frame(f, p.height, p.width, p.world_points.f32() + 3 * plane * f, p.depth_conf.f32() + plane * f,
                     p.images.f32() + 3 * plane * f);
  return points.finish();
}

}  // namespace lingbot::io
