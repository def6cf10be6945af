#include "model/position_embedding.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lingbot {

namespace {

// Keys' cubic convolution kernel with a = -0.5 (PIL's and PyTorch's
// antialiasing bicubic).
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

// Taps of one output sample along one axis.
struct Taps {
  int first = 0;
  std::vector<double> weights;
};

std::vector<Taps> antialias_taps(int in, int out) {
  const double scale = static_cast<double>(in) / out;
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double inv_scale = scale >= 1.0 ? 1.0 / scale : 1.0;
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int i = 0; i < out; ++i) {
    const double center = scale * (i + 0.5);
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);  // truncation, as the C++ cast upstream
    const int hi = std::min(static_cast<int>(center + support + 0.5), in);
    Taps& t = taps[static_cast<size_t>(i)];
    t.first = lo;
    double total = 0;
    for (int j = lo; j < hi; ++j) {
      const double w = cubic((j - center + 0.5) * inv_scale);
      t.weights.push_back(w);
      total += w;
    }
    if (total != 0)
      for (double& w : t.weights) w /= total;
  }
  return taps;
}

}  // namespace

Tensor interpolate_pos_embed(const Tensor& patch_pos, int M, int gh, int gw) {
  const int64_t C = patch_pos.numel() / (static_cast<int64_t>(M) * M);
  LB_CHECK(C * M * M == patch_pos.numel(), "position embedding {} is not a {}x{} grid", patch_pos.describe(), M, M);
  const float* src = patch_pos.f32();
  Tensor out = Tensor::empty({static_cast<int64_t>(gh) * gw, C});
  if (gh == M && gw == M) {
    out.copy_from(patch_pos.reshape({static_cast<int64_t>(M) * M, C}));
    return out;
  }
  const std::vector<Taps> ty = antialias_taps(M, gh);
  const std::vector<Taps> tx = antialias_taps(M, gw);
  // Separable: along x into a [M, gw, C] buffer, then along y.
  std::vector<double> rows(static_cast<size_t>(M) * gw * C, 0.0);
  for (int y = 0; y < M; ++y)
    for (int x = 0; x < gw; ++x) {
      double* dst = rows.data() + (static_cast<int64_t>(y) * gw + x) * C;
      const Taps& t = tx[static_cast<size_t>(x)];
      for (size_t j = 0; j < t.weights.size(); ++j) {
        const float* s = src + (static_cast<int64_t>(y) * M + t.first + static_cast<int64_t>(j)) * C;
        for (int64_t c = 0; c < C; ++c) dst[c] += t.weights[j] * s[c];
      }
    }
  float* dst = out.f32();
  for (int y = 0; y < gh; ++y)
    for (int x = 0; x < gw; ++x) {
      const Taps& t = ty[static_cast<size_t>(y)];
      float* d = dst + (static_cast<int64_t>(y) * gw + x) * C;
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0;
        for (size_t j = 0; j < t.weights.size(); ++j)
          acc += t.weights[j] * rows[((t.first + static_cast<int64_t>(j)) * gw + x) * C + c];
        d[c] = static_cast<float>(acc);
      }
    }
  return out;
}

namespace {

// The grid's coordinates along one axis (n points) and the frequencies:
// linspace in float32 as torch.linspace computes it.
std::vector<float> uv_axis(double span, int n) {
  const float start = static_cast<float>(-span * (n - 1) / n), end = static_cast<float>(span * (n - 1) / n);
  std::vector<float> v(static_cast<size_t>(n));
  const float step = n > 1 ? (end - start) / static_cast<float>(n - 1) : 0.0f;
  const int halfway = n / 2;
  for (int i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = i < halfway ? start + step * static_cast<float>(i)
                                            : end - step * static_cast<float>(n - 1 - i);
  return v;
}

std::vector<double> frequencies(int quarter) {
  std::vector<double> omega(static_cast<size_t>(quarter));
  for (int i = 0; i < quarter; ++i) omega[static_cast<size_t>(i)] = 1.0 / std::pow(100.0, static_cast<double>(i) / quarter);
  return omega;
}

// [sin(t w_i) | cos(t w_i)] * 0.1 for each coordinate t: [2 * quarter, n].
Tensor axis_table(const std::vector<float>& t, const std::vector<double>& omega) {
  const int n = static_cast<int>(t.size()), quarter = static_cast<int>(omega.size());
  Tensor out = Tensor::empty({2 * quarter, n});
  float* o = out.f32();
  for (int k = 0; k < n; ++k)
    for (int i = 0; i < quarter; ++i) {
      const double a = static_cast<double>(t[static_cast<size_t>(k)]) * omega[static_cast<size_t>(i)];
      o[int64_t{i} * n + k] = static_cast<float>(std::sin(a)) * 0.1f;
      o[int64_t{quarter + i} * n + k] = static_cast<float>(std::cos(a)) * 0.1f;
    }
  return out;
}

}  // namespace

AxisEmbedding dpt_pos_embed_axes(int channels, int h, int w, double aspect) {
  // UV grid spanning [-span, span] * (n-1)/n, normalised by the diagonal.
  // Channels: [sin(x w_i) | cos(x w_i) | sin(y w_i) | cos(y w_i)], w_i = 100^(-i / (C/4)).
  const double diag = std::sqrt(aspect * aspect + 1.0);
  const std::vector<double> omega = frequencies(channels / 4);
  return {axis_table(uv_axis(aspect / diag, w), omega), axis_table(uv_axis(1.0 / diag, h), omega)};
}

Tensor dpt_pos_embed(int channels, int h, int w, double aspect) {
  const AxisEmbedding axes = dpt_pos_embed_axes(channels, h, w, aspect);
  const int half = 2 * (channels / 4);
  Tensor out = Tensor::empty({channels, h, w});
  float* o = out.f32();
  const int64_t plane = static_cast<int64_t>(h) * w;
  for (int c = 0; c < half; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        o[c * plane + int64_t{y} * w + x] = axes.by_col.f32()[int64_t{c} * w + x];
        o[(half + c) * plane + int64_t{y} * w + x] = axes.by_row.f32()[int64_t{c} * h + y];
      }
  return out;
}

}  // namespace lingbot

