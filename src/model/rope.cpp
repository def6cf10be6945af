#include "model/rope.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lingbot {

void rope2d_table(const FrameGrid& grid, int head_dim, double base, Tensor& cos, Tensor& sin) {
  const int n = grid.tokens();
  const int half = head_dim / 2;  // features per axis
  const int quarter = half / 2;   // angles per axis
  cos = Tensor::empty({n, half});
  sin = Tensor::empty({n, half});
  // inv_freq[i] = 1 / base^(2i / half), in float32 as upstream.
  std::vector<float> inv_freq(static_cast<size_t>(quarter));
  for (int i = 0; i < quarter; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(half);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(base), exponent);
  }
  for (int t = 0; t < n; ++t) {
    int y = 0, x = 0;
    if (t >= grid.num_special) {
      const int p = t - grid.num_special;
      y = p / grid.gw + 1;
      x = p % grid.gw + 1;
    }
    float* c = cos.f32() + static_cast<int64_t>(t) * half;
    float* s = sin.f32() + static_cast<int64_t>(t) * half;
    for (int i = 0; i < quarter; ++i) {
      const float ay = static_cast<float>(y) * inv_freq[static_cast<size_t>(i)];
      const float ax = static_cast<float>(x) * inv_freq[static_cast<size_t>(i)];
      c[i] = std::cos(ay);
      s[i] = std::sin(ay);
      c[quarter + i] = std::cos(ax);
      s[quarter + i] = std::sin(ax);
    }
  }
}

void rope3d_table(const FrameGrid& grid, int head_dim, const std::array<int, 3>& fhw, double theta,
                  int64_t f_first, int num_frames, Tensor& cos, Tensor& sin) {
  const int n = grid.tokens();
  const int angles = head_dim / 2;
  cos = Tensor::empty({static_cast<int64_t>(n) * num_frames, angles});
  sin = Tensor::empty({static_cast<int64_t>(n) * num_frames, angles});
  // Per-axis frequencies 1 / theta^(2i / d), float64 as upstream.
  std::vector<double> freq[3];
  for (int a = 0; a < 3; ++a)
    for (int i = 0; i < fhw[a] / 2; ++i)
      freq[a].push_back(1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(fhw[a])));
  LB_CHECK(freq[0].size() + freq[1].size() + freq[2].size() == static_cast<size_t>(angles),
           "3D RoPE: the time, height and width dims {}+{}+{} must add up to the head dim {}", fhw[0], fhw[1], fhw[2],
           head_dim);
  // A row is [time angles | height angles | width angles]; only the time
  // part changes from frame to frame, so the height and width parts are
  // computed once for a frame's tokens and copied (a scale step's table
  // would otherwise take ~0.5 M double cos/sin pairs on the host).
  const int ft = static_cast<int>(freq[0].size());
  const int fhw_angles = angles - ft;
  std::vector<float> hw_cos(static_cast<size_t>(n) * fhw_angles), hw_sin(hw_cos.size());
  for (int t = 0; t < n; ++t) {
    double h_pos, w_pos;
    if (t < grid.num_special) {
      h_pos = w_pos = t;
    } else {
      const int p = t - grid.num_special;
      h_pos = grid.num_special + p / grid.gw;
      w_pos = grid.num_special + p % grid.gw;
    }
    int j = 0;
    for (int a = 1; a < 3; ++a) {
      const double pos = a == 1 ? h_pos : w_pos;
      for (double fr : freq[a]) {
        const double angle = pos * fr;
        hw_cos[static_cast<size_t>(t) * fhw_angles + j] = static_cast<float>(std::cos(angle));
        hw_sin[static_cast<size_t>(t) * fhw_angles + j] = static_cast<float>(std::sin(angle));
        ++j;
      }
    }
  }
  std::vector<float> t_cos(static_cast<size_t>(ft)), t_sin(t_cos.size());
  for (int f = 0; f < num_frames; ++f) {
    const double t_pos = static_cast<double>(f_first + f);
    for (int i = 0; i < ft; ++i) {
      const double angle = t_pos * freq[0][static_cast<size_t>(i)];
      t_cos[static_cast<size_t>(i)] = static_cast<float>(std::cos(angle));
      t_sin[static_cast<size_t>(i)] = static_cast<float>(std::sin(angle));
    }
    for (int t = 0; t < n; ++t) {
      const int64_t row = static_cast<int64_t>(f) * n + t;
      float* c = cos.f32() + row * angles;
      float* s = sin.f32() + row * angles;
      std::copy(t_cos.begin(), t_cos.end(), c);
      std::copy(t_sin.begin(), t_sin.end(), s);
      std::copy_n(hw_cos.data() + static_cast<size_t>(t) * fhw_angles, fhw_angles, c + ft);
      std::copy_n(hw_sin.data() + static_cast<size_t>(t) * fhw_angles, fhw_angles, s + ft);
    }
  }
}

}  // namespace lingbot
