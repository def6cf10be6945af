#include "output/point_selection.h"

#include "core/error.h"

#include <algorithm>
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

std::vector<SelectedPoint> select_points(const Predictions& p, const PointSelectionOptions& o) {
  const int H = p.height, W = p.width;
  const int step = std::max(1, o.downsample);
  const int first = std::clamp(o.first_frame, 0, p.frames);
  const int end = o.end_frame < 0 ? p.frames : std::clamp(o.end_frame, first, p.frames);
  const int64_t plane = int64_t{H} * W;

  std::vector<SelectedPoint> points;
  points.reserve(static_cast<size_t>(end - first) * static_cast<size_t>((H + step - 1) / step) *
                 static_cast<size_t>((W + step - 1) / step));
  for (int f = first; f < end; ++f) {
    const float* xyz = p.world_points.f32() + 3 * plane * f;
    const float* conf = p.depth_conf.f32() + plane * f;
    for (int y = 0; y < H; y += step) {
      for (int x = 0; x < W; x += step) {
        const int64_t i = int64_t{y} * W + x;
        const float* q = xyz + 3 * i;
        if (!std::isfinite(q[0]) || !std::isfinite(q[1]) || !std::isfinite(q[2]) || !std::isfinite(conf[i])) continue;
        SelectedPoint s{{q[0], q[1], q[2]}, {}, conf[i], f, x, y};
        const auto rgb = p.color(f, i);
        std::copy(rgb.begin(), rgb.end(), s.rgb);
        points.push_back(s);
      }
    }
  }

  if (o.conf_percentile >= 0) {
    LB_CHECK(o.conf_percentile <= 100, "--conf-percentile {}: must lie in [0, 100]", o.conf_percentile);
    if (!points.empty()) {
      // numpy.percentile's default (linear between the two nearest ranks).
      std::vector<float> c(points.size());
      for (size_t i = 0; i < points.size(); ++i) c[i] = points[i].confidence;
      std::sort(c.begin(), c.end());
      const double rank = o.conf_percentile / 100.0 * static_cast<double>(c.size() - 1);
      const size_t lo = static_cast<size_t>(std::floor(rank)), hi = std::min(lo + 1, c.size() - 1);
      const double cut = c[lo] + (rank - static_cast<double>(lo)) * (double{c[hi]} - c[lo]);
      std::erase_if(points, [&](const SelectedPoint& s) { return !(s.confidence >= cut); });
    }
  } else {
    std::erase_if(points, [&](const SelectedPoint& s) { return !(s.confidence > o.conf_threshold); });
  }

  if (o.voxel_size > 0) {
    // Sorting (voxel, index) pairs rather than hashing: one pass over memory in
    // order, which matters at millions of points. Ties keep the earlier point.
    struct Cell {
      std::array<int64_t, 3> voxel;
      uint32_t index;
    };
    std::vector<Cell> cells(points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      for (int a = 0; a < 3; ++a)
        cells[i].voxel[a] = static_cast<int64_t>(std::floor(double{points[i].xyz[a]} / o.voxel_size));
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
    points = std::move(thinned);
  }

  if (o.max_points > 0 && static_cast<int64_t>(points.size()) > o.max_points) {
    std::vector<SelectedPoint> kept(static_cast<size_t>(o.max_points));
    const double stride = static_cast<double>(points.size()) / static_cast<double>(o.max_points);
    for (size_t i = 0; i < kept.size(); ++i) kept[i] = points[static_cast<size_t>(static_cast<double>(i) * stride)];
    points = std::move(kept);
  }
  return points;
}

}  // namespace lingbot::io
