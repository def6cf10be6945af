// CPU ops on images and feature maps (NCHW, and the NHWC variants): patch
// extraction, layout changes, convolutions (oneDNN's primitives:
// onednn_conv.h; the transposed one as a matrix product and a scatter) and
// bilinear resizing.
#include "backend/cpu/bf16_convert.h"
#include "backend/cpu/conv_amx.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace lingbot::cpu {

namespace {

// align_corners=True source coordinates, in float like PyTorch's kernel:
// the two neighbours and the weight of the second, per output index.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> frac;
  Taps(int64_t in, int64_t out) : i0(static_cast<size_t>(out)), i1(static_cast<size_t>(out)), frac(static_cast<size_t>(out)) {
    const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
    for (int64_t o = 0; o < out; ++o) {
      const float src = scale * static_cast<float>(o);
      const int64_t a = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
      i0[static_cast<size_t>(o)] = a;
      i1[static_cast<size_t>(o)] = std::min<int64_t>(a + 1, in - 1);
      frac[static_cast<size_t>(o)] = src - static_cast<float>(a);
    }
  }
};

}  // namespace

void CpuBackend::patchify(const Tensor& images, int patch, const std::array<float, 3>& mean,
                          const std::array<float, 3>& std, Tensor& patches) {
  const contracts::Nchw s = contracts::check_patchify(contract(), images, patch, patches);
  const int64_t gh = s.h / patch, gw = s.w / patch, row = 3 * patch * patch;
  const float* src = images.f32();
  // The bf16 mode's patches (the patch embedding's input) are rounded once at the end.
  float* dst = patches.dtype() == DType::BF16 ? scratch_room(scratch_.staging, patches.numel()) : patches.f32();
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(s.n * s.h * s.w * 3))
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t py = 0; py < gh; ++py) {
      for (int64_t px = 0; px < gw; ++px) {
        float* out = dst + ((b * gh + py) * gw + px) * row;
        for (int c = 0; c < 3; ++c) {
          for (int dy = 0; dy < patch; ++dy) {
            const float* in = src + ((b * 3 + c) * s.h + py * patch + dy) * s.w + px * patch;
            for (int dx = 0; dx < patch; ++dx) *out++ = (in[dx] - mean[c]) / std[c];
          }
        }
      }
    }
  }
  if (patches.dtype() == DType::BF16) bf16_from_f32(dst, patches.data_as<uint16_t>(), patches.numel());
}

void CpuBackend::tokens_to_nchw(const Tensor& tokens, int h, int w, Tensor& maps) {
  const auto [B, hw, C] = contracts::check_tokens_to_nchw(contract(), tokens, h, w, maps);
  // A permutation of elements: float32, or bfloat16 moved as 16-bit words.
  const auto permute = [&](const auto* src, auto* dst) {
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(tokens.numel()))
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t p = 0; p < hw; ++p) dst[(b * C + c) * hw + p] = src[(b * hw + p) * C + c];
  };
  if (tokens.dtype() == DType::BF16) {
    permute(tokens.data_as<const uint16_t>(), maps.data_as<uint16_t>());
  } else {
    permute(tokens.f32(), maps.f32());
  }
}

void CpuBackend::conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out) {
  const contracts::ConvDims d = contracts::check_conv2d(contract(), x, w, b, stride, pad, out);
  const ConvShape shape{d.in.n, d.in.c, d.in.h, d.in.w, d.out.c, d.kernel, stride, pad};
  LB_CHECK(shape.out_h() == d.out.h && shape.out_w() == d.out.w, "conv2d: output {}x{} where {}x{} was expected",
           d.out.h, d.out.w, shape.out_h(), shape.out_w());
  convolutions_->run(shape, x.f32(), w.f32(), b ? b->f32() : nullptr, out.f32());
}

void CpuBackend::conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) {
  const contracts::ConvDims d = contracts::check_conv_transpose2d(contract(), x, w, b, k, out);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  // Kernel == stride: every output pixel has exactly one input pixel, so
  //   y[(co, ky, kx), p] = sum_ci w[ci, (co, ky, kx)] x[ci, p]
  // is one matrix product followed by a scatter to (y*k + ky, x*k + kx).
  const int64_t hw = in.h * in.w, okk = o.c * k * k;
  float* const y = scratch_room(scratch_.unscattered, okk * hw);
  const float* bias = b ? b->f32() : nullptr;
  for (int64_t n = 0; n < in.n; ++n) {
    gemm_atb(okk, hw, in.c, w.f32(), okk, x.f32() + n * in.c * hw, hw, y, hw);
    float* dst = out.f32() + n * o.c * o.h * o.w;
#pragma omp parallel for schedule(static) if (parallel_worth(okk * hw))
    for (int64_t r = 0; r < okk; ++r) {
      const int64_t co = r / (k * k), ky = (r / k) % k, kx = r % k;
      const float* yr = y + r * hw;
      for (int64_t iy = 0; iy < in.h; ++iy)
        for (int64_t ix = 0; ix < in.w; ++ix)
          dst[(co * o.h + iy * k + ky) * o.w + ix * k + kx] = yr[iy * in.w + ix] + (bias ? bias[co] : 0.0f);
    }
  }
}

void CpuBackend::resize_bilinear(const Tensor& x, const Tensor* add, Tensor& out) {
  const contracts::MapDims d = contracts::check_resize_bilinear(contract(), x, add, out);
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  const Taps ty(in.h, o.h), tx(in.w, o.w);
  const float* src = x.f32();
  float* dst = out.f32();
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(o.n * o.c * o.h * o.w))
  for (int64_t nc = 0; nc < in.n * in.c; ++nc) {
    for (int64_t oy = 0; oy < o.h; ++oy) {
      const size_t yi = static_cast<size_t>(oy);
      const float ly = ty.frac[yi], hy = 1.0f - ly;
      const float* r0 = src + (nc * in.h + ty.i0[yi]) * in.w;
      const float* r1 = src + (nc * in.h + ty.i1[yi]) * in.w;
      float* d = dst + (nc * o.h + oy) * o.w;
      for (int64_t ox = 0; ox < o.w; ++ox) {
        const size_t xi = static_cast<size_t>(ox);
        const int64_t x0 = tx.i0[xi], x1 = tx.i1[xi];
        const float l = tx.frac[xi], h = 1.0f - l;
        d[ox] = hy * (h * r0[x0] + l * r0[x1]) + ly * (h * r1[x0] + l * r1[x1]);
      }
    }
  }
  if (add != nullptr) add_broadcast(out, *add);
}

void CpuBackend::resize_bilinear_add_axes(const Tensor& x, const Tensor& by_col, const Tensor& by_row, Tensor& out) {
  const contracts::MapDims d = contracts::check_resize_bilinear_add_axes(contract(), x, by_col, by_row, out);
  resize_bilinear(x, nullptr, out);
  const contracts::Nchw& o = d.out;
  const int64_t col_channels = by_col.dim(0);
  const float* cols = by_col.f32();
  const float* rows = by_row.f32();
  float* dst = out.f32();
  // The same one addition per element as add_broadcast of the whole term.
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(o.n * o.c * o.h * o.w))
  for (int64_t nc = 0; nc < o.n * o.c; ++nc) {
    for (int64_t oy = 0; oy < o.h; ++oy) {
      const int64_t c = nc % o.c;
      float* row = dst + (nc * o.h + oy) * o.w;
      if (c < col_channels) {
        const float* a = cols + c * o.w;
#pragma omp simd
        for (int64_t ox = 0; ox < o.w; ++ox) row[ox] += a[ox];
      } else {
        const float a = rows[(c - col_channels) * o.h + oy];
#pragma omp simd
        for (int64_t ox = 0; ox < o.w; ++ox) row[ox] += a;
      }
    }
  }
}

// ---- channels last ----------------------------------------------------------

namespace {

// bfloat16 maps (option depth_head_dtype bf16) on the CPU are computed in
// float32 on widened copies, and the output is rounded once: the option
// runs, and is tested, on every backend, while its speed is the CUDA
// backend's (bf16 tensor cores). These helpers are the widening; the
// copies live for one call, so the option keeps its smaller footprint.
bool bf16_maps(const Tensor& x) { return x.dtype() == DType::BF16; }
Tensor widened(const Tensor& t) {
  Tensor f = Tensor::empty(t.shape());
  f32_from_bf16(static_cast<const uint16_t*>(t.data()), f.f32(), t.numel());
  return f;
}
Tensor float_like(const Tensor& out) { return Tensor::empty(out.shape()); }
void round_into(const Tensor& f32, Tensor& out) {
  bf16_from_f32(f32.f32(), static_cast<uint16_t*>(out.data()), out.numel());
}

}  // namespace

void CpuBackend::conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad, Tensor& out,
                             const ConvEpilogue& epilogue) {
  const contracts::ConvDims d =
      contracts::check_conv2d(contract(), x, w, b, stride, pad, out, MapLayout::ChannelsLast, epilogue);
  if (bf16_maps(x)) {
    const Tensor residual = epilogue.residual != nullptr ? widened(*epilogue.residual) : Tensor();
    Tensor y = float_like(out);
    conv2d_nhwc(widened(x), widened(w), b, stride, pad, y,
                {.act = epilogue.act, .residual = epilogue.residual != nullptr ? &residual : nullptr});
    round_into(y, out);
    return;
  }
  ConvShape shape{d.in.n, d.in.c, d.in.h, d.in.w, d.out.c, d.kernel, stride, pad};
  shape.channels_last = true;
  if (compute_ == DType::BF16 && bf16_products_ == Bf16Products::AmxTiles && conv_amx_fits(shape) &&
      (epilogue.act == Activation::None || epilogue.act == Activation::Relu)) {
    const Tensor tiles = amx_conv_weights_.get(w, [&shape](const Tensor& f32) {
      return conv_amx_pack_weights(shape, f32.f32());  // w's shape, OHWI, is all the packing depends on
    });
    conv_amx_packed(shape, x.f32(), tiles.data_as<const uint16_t>(), b ? b->f32() : nullptr,
                    epilogue.residual ? epilogue.residual->f32() : nullptr, epilogue.act, out.f32());
    return;
  }
  convolutions_->run(shape, x.f32(), w.f32(), b ? b->f32() : nullptr, out.f32());
  if (epilogue.residual == nullptr && epilogue.act == Activation::None) return;
  const int64_t n = out.numel();
  float* o = out.f32();
  const float* r = epilogue.residual ? epilogue.residual->f32() : nullptr;
  const bool relu = epilogue.act == Activation::Relu;
#pragma omp parallel for simd schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) {
    const float v = r ? o[i] + r[i] : o[i];
    o[i] = relu ? std::max(v, 0.0f) : v;
  }
}

void CpuBackend::conv_transpose2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* b, int k, Tensor& out) {
  const contracts::ConvDims d = contracts::check_conv_transpose2d(contract(), x, w, b, k, out, MapLayout::ChannelsLast);
  if (bf16_maps(x)) {
    Tensor y = float_like(out);
    conv_transpose2d_nhwc(widened(x), widened(w), b, k, y);
    round_into(y, out);
    return;
  }
  const contracts::Nchw& in = d.in;
  const contracts::Nchw& o = d.out;
  // Each input pixel p (a row of x) gives a k x k block of output pixels:
  //   y[p, (co, ky, kx)] = sum_ci x[p, ci] w[ci, (co, ky, kx)]
  // one matrix product over all pixels of all batches, then a scatter.
  const int64_t pixels = in.n * in.h * in.w, okk = o.c * k * k;
  float* const y = scratch_room(scratch_.unscattered, pixels * okk);
  gemm_ab(pixels, okk, in.c, x.f32(), in.c, w.f32(), okk, y, okk);
  const float* bias = b ? b->f32() : nullptr;
  float* dst = out.f32();
#pragma omp parallel for schedule(static) if (parallel_worth(pixels * okk))
  for (int64_t p = 0; p < pixels; ++p) {
    const int64_t n = p / (in.h * in.w), iy = (p / in.w) % in.h, ix = p % in.w;
    const float* yp = y + p * okk;
    for (int64_t ky = 0; ky < k; ++ky)
      for (int64_t kx = 0; kx < k; ++kx) {
        float* px = dst + ((n * o.h + iy * k + ky) * o.w + ix * k + kx) * o.c;
        for (int64_t co = 0; co < o.c; ++co) px[co] = yp[(co * k + ky) * k + kx] + (bias ? bias[co] : 0.0f);
      }
  }
}

namespace {

// Bilinear resize of [N, H, W, C] maps; term(n, oy, ox, c) is added to each
// output element (after the interpolation, as one more addition).
template <typename Term>
void resize_nhwc(const contracts::Nchw& in, const contracts::Nchw& o, const float* src, float* dst, Term term) {
  const Taps ty(in.h, o.h), tx(in.w, o.w);
  const int64_t C = o.c;
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth(o.n * o.c * o.h * o.w))
  for (int64_t n = 0; n < o.n; ++n) {
    for (int64_t oy = 0; oy < o.h; ++oy) {
      const size_t yi = static_cast<size_t>(oy);
      const float ly = ty.frac[yi], hy = 1.0f - ly;
      const float* r0 = src + (n * in.h + ty.i0[yi]) * in.w * C;
      const float* r1 = src + (n * in.h + ty.i1[yi]) * in.w * C;
      for (int64_t ox = 0; ox < o.w; ++ox) {
        const size_t xi = static_cast<size_t>(ox);
        const float lx = tx.frac[xi], hx = 1.0f - lx;
        const float *a0 = r0 + tx.i0[xi] * C, *a1 = r0 + tx.i1[xi] * C;
        const float *b0 = r1 + tx.i0[xi] * C, *b1 = r1 + tx.i1[xi] * C;
        float* d = dst + ((n * o.h + oy) * o.w + ox) * C;
        for (int64_t c = 0; c < C; ++c)
          d[c] = hy * (hx * a0[c] + lx * a1[c]) + ly * (hx * b0[c] + lx * b1[c]) + term(n, oy, ox, c);
      }
    }
  }
}

}  // namespace

void CpuBackend::resize_bilinear_nhwc(const Tensor& x, const Tensor* add, Tensor& out) {
  const contracts::MapDims d = contracts::check_resize_bilinear(contract(), x, add, out, MapLayout::ChannelsLast);
  if (bf16_maps(x)) {
    const Tensor term = add != nullptr ? widened(*add) : Tensor();
    Tensor y = float_like(out);
    resize_bilinear_nhwc(widened(x), add != nullptr ? &term : nullptr, y);
    round_into(y, out);
    return;
  }
  const contracts::Nchw& o = d.out;
  if (add == nullptr) {
    resize_nhwc(d.in, o, x.f32(), out.f32(), [](int64_t, int64_t, int64_t, int64_t) { return 0.0f; });
    return;
  }
  // The added term: whole [H, W, C] maps, repeating over the batches.
  const float* a = add->f32();
  const int64_t maps = add->numel() / (o.h * o.w * o.c);
  resize_nhwc(d.in, o, x.f32(), out.f32(), [a, maps, &o](int64_t n, int64_t oy, int64_t ox, int64_t c) {
    return a[(((n % maps) * o.h + oy) * o.w + ox) * o.c + c];
  });
}

void CpuBackend::resize_bilinear_add_axes_nhwc(const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                               Tensor& out) {
  const contracts::MapDims d =
      contracts::check_resize_bilinear_add_axes(contract(), x, by_col, by_row, out, MapLayout::ChannelsLast);
  if (bf16_maps(x)) {
    Tensor y = float_like(out);
    resize_bilinear_add_axes_nhwc(widened(x), by_col, by_row, y);
    round_into(y, out);
    return;
  }
  const contracts::Nchw& o = d.out;
  const int64_t cc = by_col.dim(0);
  const float* cols = by_col.f32();
  const float* rows = by_row.f32();
  resize_nhwc(d.in, o, x.f32(), out.f32(), [=, &o](int64_t, int64_t oy, int64_t ox, int64_t c) {
    return c < cc ? cols[c * o.w + ox] : rows[(c - cc) * o.h + oy];
  });
}

}  // namespace lingbot::cpu
