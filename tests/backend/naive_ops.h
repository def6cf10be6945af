// The naive twin of every Backend op (backend/backend.h) and of the KV
// cache's append/attend (kv/kv_cache.h): plain loops over output elements,
// sums in double, written from the interface's comments and nothing else
// (no backend code is called), so that a backend can be held against it.
//
// Every function takes and returns host float32 tensors. Values a backend
// would store in a 16-bit type are rounded by the caller first (round_bf16 /
// round_f16 below), so the reference sees the same inputs as the backend.
// Speed is no concern: test shapes are small.
#pragma once

#include "backend/backend.h"
#include "core/tensor.h"
#include "kv/kv_cache.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace lingbot::test::naive {

// ---- number formats ----------------------------------------------------------

// x rounded to nearest, ties to even, in a binary format with `mantissa_bits`
// stored fraction bits, smallest normal exponent `min_exponent` (below it the
// spacing stays 2^(min_exponent - mantissa_bits): subnormals) and largest
// finite value `max_finite` (beyond it: infinity). In double, where every
// step is exact for float32 inputs.
inline float round_to_format(float value, int mantissa_bits, int min_exponent, double max_finite) {
  const double x = value;
  if (!std::isfinite(x) || x == 0.0) return value;
  const int e = std::max(std::ilogb(x), min_exponent);
  const double spacing = std::ldexp(1.0, e - mantissa_bits);
  const double r = std::nearbyint(x / spacing) * spacing;  // default rounding mode: ties to even
  if (std::fabs(r) > max_finite) return static_cast<float>(std::copysign(INFINITY, x));
  return static_cast<float>(r);
}

// bfloat16: 8 exponent bits like float32, 7 fraction bits.
inline float round_bf16(float x) { return round_to_format(x, 7, -126, std::ldexp(255.0, 120)); }
// IEEE binary16: 5 exponent bits (normals from 2^-14), 10 fraction bits, max 65504.
inline float round_f16(float x) { return round_to_format(x, 10, -14, 65504.0); }

inline float round_to(float x, DType dtype) {
  switch (dtype) {
    case DType::BF16: return round_bf16(x);
    case DType::F16: return round_f16(x);
    default: return x;
  }
}

// The values `host` takes once stored as `dtype`, as a new float32 tensor.
inline Tensor rounded(const Tensor& host, DType dtype) {
  Tensor out = Tensor::empty(host.shape());
  for (int64_t i = 0; i < host.numel(); ++i) out.f32()[i] = round_to(host.f32()[i], dtype);
  return out;
}

// ---- helpers -----------------------------------------------------------------

inline float to_float(double x) { return static_cast<float>(x); }

// nn.GELU(): the exact erf form, not the tanh approximation.
inline double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

inline double activate(double x, Activation act) {
  switch (act) {
    case Activation::Gelu: return gelu(x);
    case Activation::Relu: return x > 0 ? x : 0.0;
    case Activation::None: break;
  }
  return x;
}

// ---- dense layers ------------------------------------------------------------

// out[N, M] = act(x[N, K] w[M, K]^T + b[M]).
inline Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b, Activation act) {
  const int64_t M = w.dim(0), K = w.dim(1), N = x.numel() / K;
  Tensor out = Tensor::empty({N, M});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double s = b ? b->f32()[m] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(x.f32()[n * K + k]) * w.f32()[m * K + k];
      out.f32()[n * M + m] = to_float(activate(s, act));
    }
  return out;
}

// residual[N, M] + gamma[M] * (x w^T + b), as a new tensor.
inline Tensor linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                              const Tensor& residual) {
  const int64_t M = w.dim(0), K = w.dim(1), N = x.numel() / K;
  Tensor out = Tensor::empty(residual.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double s = b ? b->f32()[m] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(x.f32()[n * K + k]) * w.f32()[m * K + k];
      const double g = gamma ? gamma->f32()[m] : 1.0;
      out.f32()[n * M + m] = to_float(residual.f32()[n * M + m] + g * s);
    }
  return out;
}

// LayerNorm of each run of `c` values at `x` (PyTorch's: biased variance, eps
// inside the square root), then * w + b where given.
inline void normalize_into(const float* x, int64_t c, const float* w, const float* b, double eps, float* out) {
  double mean = 0;
  for (int64_t i = 0; i < c; ++i) mean += x[i];
  mean /= static_cast<double>(c);
  double var = 0;
  for (int64_t i = 0; i < c; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(c);
  for (int64_t i = 0; i < c; ++i) {
    double y = (x[i] - mean) / std::sqrt(var + eps);
    if (w) y *= w[i];
    if (b) y += b[i];
    out[i] = to_float(y);
  }
}

// out[N, C] = LayerNorm over the last dimension C.
inline Tensor layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps) {
  const int64_t C = x.dim(-1), N = x.numel() / C;
  Tensor out = Tensor::empty(x.shape());
  for (int64_t n = 0; n < N; ++n)
    normalize_into(x.f32() + n * C, C, w ? w->f32() : nullptr, b ? b->f32() : nullptr, eps, out.f32() + n * C);
  return out;
}

// ---- attention ---------------------------------------------------------------

// QkNorm and RopeTable with host tensors.
struct HostQkNorm {
  const Tensor* q_weight = nullptr;
  const Tensor* q_bias = nullptr;
  const Tensor* k_weight = nullptr;
  const Tensor* k_bias = nullptr;
  float eps = 1e-5f;
};

struct HostRope {
  Tensor cos, sin;  // [rows, head_dim / 2]
  RopeTable::Pairs pairs = RopeTable::Pairs::HalfSplit;
};

// The element pairs (first, second) that angle j rotates in a head vector of
// `head_dim` elements, as backend.h's RopeTable describes them.
inline std::pair<int, int> rope_pair(int j, int head_dim, RopeTable::Pairs pairs) {
  if (pairs == RopeTable::Pairs::Interleaved) return {2 * j, 2 * j + 1};
  // HalfSplit: halves of h = D/2 elements; angle j < D/4 rotates i = j with
  // i + h/2 in the first half, angle j >= D/4 the same inside the second.
  const int h = head_dim / 2, quarter = head_dim / 4;
  const int half = j < quarter ? 0 : 1;
  const int i = j - half * quarter;
  return {half * h + i, half * h + i + h / 2};
}

// One head vector rotated by table row `row`: the usual RoPE rotation of
// each pair (a, b) by its angle: (a cos - b sin, a sin + b cos).
inline void rotate(float* x, int head_dim, const HostRope& rope, int64_t row) {
  std::vector<double> y(x, x + head_dim);
  for (int j = 0; j < head_dim / 2; ++j) {
    const auto [p, q] = rope_pair(j, head_dim, rope.pairs);
    const double c = rope.cos.f32()[row * (head_dim / 2) + j], s = rope.sin.f32()[row * (head_dim / 2) + j];
    y[p] = x[p] * c - x[q] * s;
    y[q] = x[p] * s + x[q] * c;
  }
  for (int d = 0; d < head_dim; ++d) x[d] = to_float(y[d]);
}

struct Qkv {
  Tensor q, k, v;
};

// qkv[N, 3 * H * D] -> q, k, v [N, H * D]: q and k per-head LayerNormed
// (when `norm`), then rotated by table row t % rows (when `rope`); v as is.
inline Qkv split_qkv(const Tensor& qkv, int num_heads, int head_dim, const HostQkNorm* norm,
                     const HostRope* rope) {
  const int64_t C = int64_t{num_heads} * head_dim, N = qkv.numel() / (3 * C);
  Qkv out{Tensor::empty({N, C}), Tensor::empty({N, C}), Tensor::empty({N, C})};
  Tensor* parts[3] = {&out.q, &out.k, &out.v};
  for (int64_t t = 0; t < N; ++t)
    for (int s = 0; s < 3; ++s)
      for (int h = 0; h < num_heads; ++h) {
        const float* src = qkv.f32() + t * 3 * C + s * C + int64_t{h} * head_dim;
        float* dst = parts[s]->f32() + t * C + int64_t{h} * head_dim;
        for (int d = 0; d < head_dim; ++d) dst[d] = src[d];
        if (s == 2) continue;
        if (norm) {
          const Tensor* w = s == 0 ? norm->q_weight : norm->k_weight;
          const Tensor* b = s == 0 ? norm->q_bias : norm->k_bias;
          normalize_into(src, head_dim, w ? w->f32() : nullptr, b ? b->f32() : nullptr, norm->eps, dst);
        }
        if (rope) rotate(dst, head_dim, *rope, t % rope->cos.dim(0));
      }
  return out;
}

// Softmax attention of q rows over k/v rows, all [rows, H, D] with rows
// given separately: out[i, h] = sum_j softmax_j(q_i.k_j / sqrt(D)) v_j,
// softmax in two passes (max first). No keys: zeros.
inline void attend_rows(const float* q, int64_t nq, const float* k, const float* v, int64_t nk, int num_heads,
                        int head_dim, float* out) {
  const int64_t row = int64_t{num_heads} * head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<double> score(static_cast<size_t>(nk));
  for (int64_t i = 0; i < nq; ++i)
    for (int h = 0; h < num_heads; ++h) {
      const float* qi = q + i * row + int64_t{h} * head_dim;
      double max_score = -INFINITY;
      for (int64_t j = 0; j < nk; ++j) {
        double s = 0;
        for (int d = 0; d < head_dim; ++d) s += static_cast<double>(qi[d]) * k[j * row + int64_t{h} * head_dim + d];
        score[static_cast<size_t>(j)] = s * scale;
        max_score = std::max(max_score, s * scale);
      }
      double denom = 0;
      for (int64_t j = 0; j < nk; ++j) denom += std::exp(score[static_cast<size_t>(j)] - max_score);
      for (int d = 0; d < head_dim; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < nk; ++j)
          acc += std::exp(score[static_cast<size_t>(j)] - max_score) * v[j * row + int64_t{h} * head_dim + d];
        out[i * row + int64_t{h} * head_dim + d] = nk == 0 ? 0.0f : to_float(acc / denom);
      }
    }
}

// Self-attention inside each of `groups` equal groups of rows of q, k, v [groups * n, H * D].
inline Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads,
                        int head_dim) {
  const int64_t row = int64_t{num_heads} * head_dim, n = q.numel() / row / groups;
  Tensor out = Tensor::empty(q.shape());
  for (int g = 0; g < groups; ++g) {
    const int64_t off = g * n * row;
    attend_rows(q.f32() + off, n, k.f32() + off, v.f32() + off, n, num_heads, head_dim, out.f32() + off);
  }
  return out;
}

// ---- element-wise and data movement -----------------------------------------

// dst after the copy (a new tensor; rows outside the blocks keep dst's values).
inline Tensor copy_rows(const Tensor& src, const Tensor& dst, const RowCopy& c) {
  Tensor out = dst.clone();
  for (int64_t b = 0; b < c.batches; ++b)
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t col = 0; col < c.cols; ++col)
        out.f32()[(c.dst_offset + b * c.dst_batch_stride + r) * c.cols + col] =
            src.f32()[(c.src_offset + b * c.src_batch_stride + r) * c.cols + col];
  return out;
}

// out[N, Ca + Cb] = [a | b] per row.
inline Tensor concat_cols(const Tensor& a, const Tensor& b) {
  const int64_t ca = a.dim(-1), cb = b.dim(-1), n = a.numel() / ca;
  Tensor out = Tensor::empty({n, ca + cb});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < ca + cb; ++c)
      out.f32()[i * (ca + cb) + c] = c < ca ? a.f32()[i * ca + c] : b.f32()[i * cb + (c - ca)];
  return out;
}

// x + y with y repeating over x's leading dimensions (element i uses y[i % numel(y)]).
inline Tensor add_broadcast(const Tensor& x, const Tensor& y) {
  Tensor out = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    out.f32()[i] = to_float(static_cast<double>(x.f32()[i]) + y.f32()[i % y.numel()]);
  return out;
}

inline Tensor add(const Tensor& a, const Tensor& b) { return add_broadcast(a, b); }

inline Tensor relu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) out.f32()[i] = x.f32()[i] > 0 ? x.f32()[i] : 0.0f;
  return out;
}

// x * sigmoid(x).
inline Tensor silu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.f32()[i];
    out.f32()[i] = to_float(v / (1.0 + std::exp(-v)));
  }
  return out;
}

// out = gate * (xn * (1 + scale) + shift) + residual, [shift | scale | gate] = mod[N, 3C].
inline Tensor adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual) {
  const int64_t C = xn.dim(-1), N = xn.numel() / C;
  Tensor out = Tensor::empty(xn.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double shift = mod.f32()[n * 3 * C + c];
      const double scale = mod.f32()[n * 3 * C + C + c];
      const double gate = mod.f32()[n * 3 * C + 2 * C + c];
      out.f32()[n * C + c] =
          to_float(gate * (xn.f32()[n * C + c] * (1.0 + scale) + shift) + residual.f32()[n * C + c]);
    }
  return out;
}

// ---- images and feature maps (NCHW) -----------------------------------------

// images[B, 3, H, W] -> [B * (H/p) * (W/p), 3 * p * p]: row (b, py, px), column
// (channel, dy, dx), value (pixel - mean[channel]) / std[channel].
inline Tensor patchify(const Tensor& images, int p, const std::array<float, 3>& mean,
                       const std::array<float, 3>& std) {
  const int64_t B = images.dim(0), H = images.dim(2), W = images.dim(3), gh = H / p, gw = W / p;
  Tensor out = Tensor::empty({B * gh * gw, 3 * int64_t{p} * p});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t py = 0; py < gh; ++py)
      for (int64_t px = 0; px < gw; ++px)
        for (int c = 0; c < 3; ++c)
          for (int dy = 0; dy < p; ++dy)
            for (int dx = 0; dx < p; ++dx) {
              const int64_t row = (b * gh + py) * gw + px, col = (int64_t{c} * p + dy) * p + dx;
              const double pixel = images.f32()[((b * 3 + c) * H + py * p + dy) * W + px * p + dx];
              out.f32()[row * 3 * p * p + col] = to_float((pixel - mean[c]) / std[c]);
            }
  return out;
}

// tokens[B, h * w, C] -> maps[B, C, h, w].
inline Tensor tokens_to_nchw(const Tensor& tokens, int h, int w) {
  const int64_t C = tokens.dim(-1), hw = int64_t{h} * w, B = tokens.numel() / (hw * C);
  Tensor out = Tensor::empty({B, C, h, w});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          out.f32()[((b * C + c) * h + y) * w + x] = tokens.f32()[(b * hw + y * w + x) * C + c];
  return out;
}

// [a, b, c, d] -> [a, c, d, b] (NCHW -> NHWC, or OIHW -> OHWI).
inline Tensor channels_last(const Tensor& t) {
  const int64_t A = t.dim(0), B = t.dim(1), P = t.dim(2) * t.dim(3);
  Tensor out = Tensor::empty({A, t.dim(2), t.dim(3), B});
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < P; ++p) out.f32()[(a * P + p) * B + b] = t.f32()[(a * B + b) * P + p];
  return out;
}

// Conv2d: x[B, Cin, H, W], w[Cout, Cin, k, k], zero padding `pad`, output
// [B, Cout, (H + 2 pad - k) / stride + 1, (W + 2 pad - k) / stride + 1].
inline Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad) {
  const int64_t B = x.dim(0), Cin = x.dim(1), H = x.dim(2), W = x.dim(3), Cout = w.dim(0), k = w.dim(2);
  const int64_t OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
  Tensor out = Tensor::empty({B, Cout, OH, OW});
  for (int64_t n = 0; n < B; ++n)
    for (int64_t co = 0; co < Cout; ++co)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double s = b ? b->f32()[co] : 0.0;
          for (int64_t ci = 0; ci < Cin; ++ci)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += static_cast<double>(w.f32()[((co * Cin + ci) * k + ky) * k + kx]) *
                     x.f32()[((n * Cin + ci) * H + iy) * W + ix];
              }
          out.f32()[((n * Cout + co) * OH + oy) * OW + ox] = to_float(s);
        }
  return out;
}

// ConvTranspose2d with kernel == stride == k, w[Cin, Cout, k, k]: input pixel
// (iy, ix) alone makes the k x k output block at (iy k, ix k).
inline Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int k) {
  const int64_t B = x.dim(0), Cin = x.dim(1), H = x.dim(2), W = x.dim(3), Cout = w.dim(1);
  Tensor out = Tensor::empty({B, Cout, H * k, W * k});
  for (int64_t n = 0; n < B; ++n)
    for (int64_t co = 0; co < Cout; ++co)
      for (int64_t oy = 0; oy < H * k; ++oy)
        for (int64_t ox = 0; ox < W * k; ++ox) {
          const int64_t iy = oy / k, ix = ox / k, ky = oy % k, kx = ox % k;
          double s = b ? b->f32()[co] : 0.0;
          for (int64_t ci = 0; ci < Cin; ++ci)
            s += static_cast<double>(x.f32()[((n * Cin + ci) * H + iy) * W + ix]) *
                 w.f32()[((ci * Cout + co) * k + ky) * k + kx];
          out.f32()[((n * Cout + co) * H * k + oy) * W * k + ox] = to_float(s);
        }
  return out;
}

// Bilinear resize of x[B, C, H, W] to [B, C, oh, ow], align_corners=True:
// output pixel o samples source coordinate o (in - 1) / (out - 1) (0 when
// out is 1); then + add[i % numel(add)] when `add` is given.
inline Tensor resize_bilinear(const Tensor& x, const Tensor* add, int64_t oh, int64_t ow) {
  const int64_t B = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  Tensor out = Tensor::empty({B, C, oh, ow});
  auto source = [](int64_t o, int64_t in, int64_t n_out) {
    return n_out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) / static_cast<double>(n_out - 1) : 0.0;
  };
  for (int64_t p = 0; p < B * C; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const double sy = source(oy, H, oh), sx = source(ox, W, ow);
        const int64_t y0 = std::min(static_cast<int64_t>(std::floor(sy)), H - 1), y1 = std::min(y0 + 1, H - 1);
        const int64_t x0 = std::min(static_cast<int64_t>(std::floor(sx)), W - 1), x1 = std::min(x0 + 1, W - 1);
        const double fy = sy - static_cast<double>(y0), fx = sx - static_cast<double>(x0);
        const float* plane = x.f32() + p * H * W;
        const double v = (1 - fy) * ((1 - fx) * plane[y0 * W + x0] + fx * plane[y0 * W + x1]) +
                         fy * ((1 - fx) * plane[y1 * W + x0] + fx * plane[y1 * W + x1]);
        const int64_t i = (p * oh + oy) * ow + ox;
        out.f32()[i] = to_float(add ? v + add->f32()[i % add->numel()] : v);
      }
  return out;
}

// ---- KV cache ----------------------------------------------------------------

// The cache semantics of kv/kv_cache.h and kv/window_policy.h over K/V values:
//   store(F): the F frames join the frame list L; then, once for the step,
//     if frames have more than one token and |L| > W + S, the frames
//     L[S, |L| - W) are evicted, their specials (the first num_special
//     tokens, or only the camera token with camera_only) staying visible
//     when cross_frame_special; L keeps its first S frames only with
//     include_scale_frames, and its last W frames.
//   visible = retained specials + every token of every frame in L.
// A non-keyframe step attends to visible + its own frames and changes nothing.
class KvCache {
 public:
  KvCache(const kv::CacheConfig& config, const kv::TokenLayout& layout, int num_blocks)
      : config_(config), layout_(layout), blocks_(static_cast<size_t>(num_blocks)) {}

  void begin_step(int num_frames, bool store) {
    frames_ = num_frames;
    store_ = store;
  }

  // k, v: [frames * tokens_per_frame, H, D]. Stored frames join L now; the
  // step's eviction runs in end_step(), but attend() already sees it.
  void append(int block, const Tensor& k, const Tensor& v) {
    Block& b = blocks_[static_cast<size_t>(block)];
    b.own.clear();
    const int64_t frame_floats = int64_t{layout_.tokens_per_frame()} * layout_.row_floats();
    for (int f = 0; f < frames_; ++f) {
      Frame frame;
      frame.k.assign(k.f32() + f * frame_floats, k.f32() + (f + 1) * frame_floats);
      frame.v.assign(v.f32() + f * frame_floats, v.f32() + (f + 1) * frame_floats);
      b.own.push_back(std::move(frame));
    }
  }

  // q: [nq, H, D]; softmax over every visible key of `block`.
  Tensor attend(int block, const Tensor& q) const {
    const Block& b = blocks_[static_cast<size_t>(block)];
    std::vector<Frame> list = b.list;
    std::vector<float> keys = b.retained_k, values = b.retained_v;
    if (store_) {
      list.insert(list.end(), b.own.begin(), b.own.end());
      evict(list, keys, values);
    }
    for (const Frame& f : list) {
      keys.insert(keys.end(), f.k.begin(), f.k.end());
      values.insert(values.end(), f.v.begin(), f.v.end());
    }
    if (!store_)
      for (const Frame& f : b.own) {
        keys.insert(keys.end(), f.k.begin(), f.k.end());
        values.insert(values.end(), f.v.begin(), f.v.end());
      }
    Tensor out = Tensor::empty(q.shape());
    const int64_t nk = static_cast<int64_t>(keys.size()) / layout_.row_floats();
    attend_rows(q.f32(), q.dim(0), keys.data(), values.data(), nk, layout_.num_heads, layout_.head_dim, out.f32());
    return out;
  }

  void end_step() {
    if (!store_) return;
    for (Block& b : blocks_) {
      b.list.insert(b.list.end(), b.own.begin(), b.own.end());
      evict(b.list, b.retained_k, b.retained_v);
    }
  }

 private:
  struct Frame {
    std::vector<float> k, v;  // [tokens_per_frame, H, D]
  };
  struct Block {
    std::vector<Frame> list;                       // L
    std::vector<float> retained_k, retained_v;     // specials of evicted frames
    std::vector<Frame> own;                        // this step's frames
  };

  void evict(std::vector<Frame>& list, std::vector<float>& retained_k, std::vector<float>& retained_v) const {
    const int64_t n = static_cast<int64_t>(list.size()), W = config_.sliding_window, S = config_.scale_frames;
    if (layout_.tokens_per_frame() <= 1 || n <= W + S) return;
    const int64_t keep = config_.camera_only ? std::min(1, layout_.num_special) : layout_.num_special;
    const int64_t row = layout_.row_floats();
    if (config_.cross_frame_special)
      for (int64_t i = S; i < n - W; ++i) {
        const Frame& f = list[static_cast<size_t>(i)];
        retained_k.insert(retained_k.end(), f.k.begin(), f.k.begin() + keep * row);
        retained_v.insert(retained_v.end(), f.v.begin(), f.v.begin() + keep * row);
      }
    std::vector<Frame> kept;
    if (config_.include_scale_frames) kept.assign(list.begin(), list.begin() + S);
    kept.insert(kept.end(), list.end() - W, list.end());
    list = std::move(kept);
  }

  kv::CacheConfig config_;
  kv::TokenLayout layout_;
  std::vector<Block> blocks_;
  int frames_ = 0;
  bool store_ = false;
};

}  // namespace lingbot::test::naive
