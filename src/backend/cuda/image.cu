// Image and feature-map kernels: patch extraction, the scatter step of the
// DPT head's transposed convolutions, bilinear resizing, and the
// channels-last (NHWC) variants with the convolutions' epilogue. Every output
// element is written once by one thread, and neighbouring threads write
// neighbouring elements (coalesced).
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace lingbot::cuda::kernels {

namespace {

struct Normalisation {
  float mean[3];
  float stddev[3];
};

// patches[(b, py, px), (c, dy, dx)] = (images[b, c, py*p + dy, px*p + dx] - mean[c]) / std[c]
template <typename T>
__global__ void patchify_kernel(const float* images, int64_t batches, int64_t height, int64_t width, int p,
                                Normalisation norm, T* patches) {
  const int64_t gh = height / p, gw = width / p;
  const int64_t row = 3 * int64_t{p} * p;
  const int64_t n = batches * gh * gw * row;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t patch = o / row, j = o % row;
    const int64_t b = patch / (gh * gw), py = (patch / gw) % gh, px = patch % gw;
    const int c = static_cast<int>(j / (p * p));
    const int64_t dy = (j / p) % p, dx = j % p;
    const float v = images[((b * 3 + c) * height + py * p + dy) * width + px * p + dx];
    patches[o] = from_float<T>((v - norm.mean[c]) / norm.stddev[c]);
  }
}

// out[b, co, oy, ox] = y[((co * k + oy % k) * k + ox % k), (oy / k) * w + ox / k] + bias[co]
__global__ void scatter_transposed_conv_kernel(const float* y, const float* bias, float* out, int64_t cout, int64_t h,
                                               int64_t w, int k) {
  const int64_t oh = h * k, ow = w * k;
  const int64_t n = cout * oh * ow;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t co = o / (oh * ow), oy = (o / ow) % oh, ox = o % ow;
    const int64_t iy = oy / k, ky = oy % k, ix = ox / k, kx = ox % k;
    const float v = y[((co * k + ky) * k + kx) * (h * w) + iy * w + ix];
    out[o] = bias ? v + bias[co] : v;
  }
}

// align_corners=True: output index o reads source indices i0 and i1 with
// weights 1 - l and l. The same float arithmetic as the CPU backend: source
// coordinate = scale * o in float, the lower neighbour by truncation.
template <typename I>
struct Tap {
  I i0, i1;
  float l;
};
template <typename I>
__device__ __forceinline__ Tap<I> tap(float scale, I o, I last) {
  const float s = scale * static_cast<float>(o);
  const I i0 = min(static_cast<I>(s), last);
  return {i0, min(static_cast<I>(i0 + 1), last), s - static_cast<float>(i0)};
}

// Bilinear resize (tap() above). One block per output row (plane, oy), threads along the row: the row's
// source rows and weights are worked out once per block, and every thread
// has several independent outputs (a grid-stride loop over rows would leave
// each thread a long chain of dependent iterations, several times slower
// than writing the DPT head's 97 MB full-resolution output needs).
__global__ void resize_bilinear_kernel(const float* __restrict__ x, const float* __restrict__ add, int64_t add_planes,
                                       AxisTerm axes, float* __restrict__ out, int64_t rows, int64_t ih, int64_t iw,
                                       int64_t oh, int64_t ow, float scale_h, float scale_w) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t plane = row / oh, oy = row - plane * oh;
    const Tap<int64_t> ty = tap(scale_h, oy, ih - 1);
    const float ly = ty.l, hy = 1.0f - ly;
    const float* r0 = x + (plane * ih + ty.i0) * iw;
    const float* r1 = x + (plane * ih + ty.i1) * iw;
    const float* a = add != nullptr ? add + ((plane % add_planes) * oh + oy) * ow : nullptr;
    // The axis term (resize_bilinear_add_axes): a row of by_col, or one
    // value of by_row for the whole output row.
    float row_term = 0.f;
    if (axes.channels > 0) {
      const int64_t c = plane % axes.channels;
      if (c < axes.col_channels) {
        a = axes.by_col + c * ow;
      } else {
        row_term = axes.by_row[(c - axes.col_channels) * oh + oy];
      }
    }
    float* o = out + row * ow;
    const int last = static_cast<int>(iw - 1);
    for (int ox = threadIdx.x; ox < ow; ox += blockDim.x) {
      const Tap<int> tx = tap(scale_w, ox, last);
      const int x0 = tx.i0, x1 = tx.i1;
      const float lx = tx.l, hx = 1.0f - lx;
      float v = hy * (hx * r0[x0] + lx * r0[x1]) + ly * (hx * r1[x0] + lx * r1[x1]);
      if (a != nullptr) {
        v += a[ox];  // rounded once more, as a separate add pass would
      } else if (axes.channels > 0) {
        v += row_term;
      }
      o[ox] = v;
    }
  }
}

// ---- channels last ----------------------------------------------------------
// Maps of float32 or bfloat16 (T), every sum in float32; biases and position
// terms stay float32.

// V consecutive elements of T as floats, as one vector access where V is 4
// (the caller checks the alignment).
template <typename T, int V>
struct Floats {
  float v[V];
  __device__ __forceinline__ static Floats load(const T* p) {
    Floats f;
    if constexpr (V == 4 && std::is_same_v<T, float>) {
      const float4 q = *reinterpret_cast<const float4*>(p);
      f.v[0] = q.x, f.v[1] = q.y, f.v[2] = q.z, f.v[3] = q.w;
    } else if constexpr (V == 4) {  // four 16-bit values: one 8-byte load
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      const T* e = reinterpret_cast<const T*>(&q);
#pragma unroll
      for (int t = 0; t < V; ++t) f.v[t] = to_float(e[t]);
    } else {
#pragma unroll
      for (int t = 0; t < V; ++t) f.v[t] = to_float(p[t]);
    }
    return f;
  }
  __device__ __forceinline__ void store(T* p) const {
    if constexpr (V == 4 && std::is_same_v<T, float>) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (V == 4) {
      uint2 q;
      T* e = reinterpret_cast<T*>(&q);
#pragma unroll
      for (int t = 0; t < V; ++t) e[t] = from_float<T>(v[t]);
      *reinterpret_cast<uint2*>(p) = q;
    } else {
#pragma unroll
      for (int t = 0; t < V; ++t) p[t] = from_float<T>(v[t]);
    }
  }
};

// out[p, c] = act(out[p, c] + bias[c] + residual[p, c]) over [pixels,
// channels], V elements per thread (V divides channels); bias and residual
// may be null. The sums in the order of separate bias and add passes.
template <typename T, int V>
__global__ void conv_epilogue_nhwc_kernel(T* __restrict__ out, const float* __restrict__ bias,
                                          const T* __restrict__ residual, bool relu_out, int64_t n,
                                          int64_t channels) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x * V;
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * V; i < n; i += step) {
    Floats<T, V> v = Floats<T, V>::load(out + i);
    if (bias != nullptr) {
      const Floats<float, V> b = Floats<float, V>::load(bias + i % channels);
#pragma unroll
      for (int t = 0; t < V; ++t) v.v[t] += b.v[t];
    }
    if (residual != nullptr) {
      const Floats<T, V> r = Floats<T, V>::load(residual + i);
#pragma unroll
      for (int t = 0; t < V; ++t) v.v[t] += r.v[t];
    }
    if (relu_out) {
#pragma unroll
      for (int t = 0; t < V; ++t) v.v[t] = relu(v.v[t]);
    }
    v.store(out + i);
  }
}

// out[b, oy, ox, co] = y[(b, oy / k, ox / k), (co * k + oy % k) * k + ox % k] + bias[co]:
// y (float32 sums) holds one row of cout * k * k per input pixel.
template <typename T>
__global__ void scatter_transposed_conv_nhwc_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                                    T* __restrict__ out, int64_t n, int64_t cout, int64_t h,
                                                    int64_t w, int k) {
  const int64_t oh = h * k, ow = w * k;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t co = o % cout, pixel = o / cout;
    const int64_t ox = pixel % ow, oy = (pixel / ow) % oh, b = pixel / (ow * oh);
    const int64_t in_pixel = (b * h + oy / k) * w + ox / k;
    const float v = y[in_pixel * cout * k * k + (co * k + oy % k) * k + ox % k];
    out[o] = from_float<T>(bias ? v + bias[co] : v);
  }
}

// resize_bilinear_kernel's arithmetic on [N, H, W, C] maps: one block per
// output row (n, oy), threads along the row's (ox, c) elements, V channels
// each (V divides C). add: whole [oh, ow, C] maps, add_maps of them,
// repeating over n.
template <typename T, int V>
__global__ void resize_bilinear_nhwc_kernel(const T* __restrict__ x, const T* __restrict__ add, int64_t add_maps,
                                            AxisTerm axes, T* __restrict__ out, int64_t rows, int64_t ih, int64_t iw,
                                            int64_t oh, int ow, int channels, float scale_h, float scale_w) {
  const int row_vectors = ow * channels / V;
  const int last = static_cast<int>(iw - 1);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t n = row / oh, oy = row - n * oh;
    const Tap<int64_t> ty = tap(scale_h, oy, ih - 1);
    const float ly = ty.l, hy = 1.0f - ly;
    const T* r0 = x + (n * ih + ty.i0) * iw * channels;
    const T* r1 = x + (n * ih + ty.i1) * iw * channels;
    const T* a = add != nullptr ? add + ((n % add_maps) * oh + oy) * ow * channels : nullptr;
    T* o = out + row * ow * channels;
    for (int j = threadIdx.x; j < row_vectors; j += blockDim.x) {
      const int e = j * V, ox = e / channels, c = e - ox * channels;
      const Tap<int> tx = tap(scale_w, ox, last);
      const int x0 = tx.i0, x1 = tx.i1;
      const float lx = tx.l, hx = 1.0f - lx;
      using F = Floats<T, V>;
      const F p00 = F::load(r0 + x0 * channels + c), p01 = F::load(r0 + x1 * channels + c);
      const F p10 = F::load(r1 + x0 * channels + c), p11 = F::load(r1 + x1 * channels + c);
      F v;
#pragma unroll
      for (int t = 0; t < V; ++t)
        v.v[t] = hy * (hx * p00.v[t] + lx * p01.v[t]) + ly * (hx * p10.v[t] + lx * p11.v[t]);
      if (a != nullptr) {
        const F term = F::load(a + e);
#pragma unroll
        for (int t = 0; t < V; ++t) v.v[t] += term.v[t];  // rounded once more, as a separate add pass would
      } else if (axes.channels > 0) {
#pragma unroll
        for (int t = 0; t < V; ++t) {
          const int64_t ch = c + t;
          v.v[t] += ch < axes.col_channels ? axes.by_col[ch * ow + ox] : axes.by_row[(ch - axes.col_channels) * oh + oy];
        }
      }
      v.store(o + e);
    }
  }
}

// The source step per output index with align_corners=True, as the CPU
// backend: (in - 1) / (out - 1) in float, 0 for a single output row/column.
float align_corners_scale(int64_t in, int64_t out) {
  return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
}

}  // namespace

void patchify(const float* images, int64_t batches, int64_t height, int64_t width, int patch, const float mean[3],
              const float stddev[3], void* patches, DType patches_type, cudaStream_t stream) {
  const int64_t n = batches * height * width * 3;  // every pixel lands in exactly one patch
  if (n == 0) return;
  Normalisation norm{};
  for (int c = 0; c < 3; ++c) {
    norm.mean[c] = mean[c];
    norm.stddev[c] = stddev[c];
  }
  dispatch_float(patches_type, "patchify", [&](auto tag) {
    using T = decltype(tag);
    patchify_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(images, batches, height, width, patch, norm,
                                                             static_cast<T*>(patches));
  });
  LB_CUDA_CHECK_LAUNCH();
}

void scatter_transposed_conv(const float* y, const float* bias, float* out, int64_t batch, int64_t cout, int64_t h,
                             int64_t w, int k, cudaStream_t stream) {
  const int64_t per_batch = cout * h * k * w * k;
  if (per_batch == 0) return;
  scatter_transposed_conv_kernel<<<grid_for(per_batch), kThreads, 0, stream>>>(y, bias, out + batch * per_batch, cout,
                                                                               h, w, k);
  LB_CUDA_CHECK_LAUNCH();
}

void resize_bilinear(const float* x, const float* add, int64_t add_planes, float* out, int64_t planes, int64_t ih,
                     int64_t iw, int64_t oh, int64_t ow, cudaStream_t stream, const AxisTerm& axes) {
  // Columns are indexed in int (the caller checks the row widths).
  const int64_t n = planes * oh * ow;
  if (n == 0) return;
  const float scale_h = align_corners_scale(ih, oh), scale_w = align_corners_scale(iw, ow);
  const int64_t rows = planes * oh;
  constexpr int kRowThreads = 128;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
  resize_bilinear_kernel<<<blocks, kRowThreads, 0, stream>>>(x, add, add_planes, axes, out, rows, ih, iw, oh, ow,
                                                             scale_h, scale_w);
  LB_CUDA_CHECK_LAUNCH();
}

void conv_epilogue_nhwc(void* out, DType maps, const float* bias, const void* residual, bool relu_out,
                        int64_t pixels, int64_t channels, cudaStream_t stream) {
  const int64_t n = pixels * channels;
  if (n == 0 || (bias == nullptr && residual == nullptr && !relu_out)) return;
  const bool vector = channels % 4 == 0 && aligned16(out) && (bias == nullptr || aligned16(bias)) &&
                      (residual == nullptr || aligned16(residual));
  dispatch_float(maps, "conv_epilogue_nhwc", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    const T* r = static_cast<const T*>(residual);
    if (vector) {
      conv_epilogue_nhwc_kernel<T, 4><<<grid_for(n / 4), kThreads, 0, stream>>>(o, bias, r, relu_out, n, channels);
    } else {
      conv_epilogue_nhwc_kernel<T, 1><<<grid_for(n), kThreads, 0, stream>>>(o, bias, r, relu_out, n, channels);
    }
  });
  LB_CUDA_CHECK_LAUNCH();
}

void scatter_transposed_conv_nhwc(const float* y, const float* bias, void* out, DType maps, int64_t batches,
                                  int64_t cout, int64_t h, int64_t w, int k, cudaStream_t stream) {
  const int64_t n = batches * h * k * w * k * cout;
  if (n == 0) return;
  dispatch_float(maps, "scatter_transposed_conv_nhwc", [&](auto tag) {
    using T = decltype(tag);
    scatter_transposed_conv_nhwc_kernel<T>
        <<<grid_for(n), kThreads, 0, stream>>>(y, bias, static_cast<T*>(out), n, cout, h, w, k);
  });
  LB_CUDA_CHECK_LAUNCH();
}

void resize_bilinear_nhwc(const void* x, const void* add, int64_t add_maps, void* out, DType maps, int64_t batches,
                          int64_t channels, int64_t ih, int64_t iw, int64_t oh, int64_t ow, cudaStream_t stream,
                          const AxisTerm& axes) {
  const int64_t n = batches * oh * ow * channels;
  if (n == 0) return;
  const float scale_h = align_corners_scale(ih, oh), scale_w = align_corners_scale(iw, ow);
  const int64_t rows = batches * oh;
  constexpr int kRowThreads = 128;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
  const int c = static_cast<int>(channels), w = static_cast<int>(ow);
  const bool vector = channels % 4 == 0 && aligned16(x) && aligned16(out) && (add == nullptr || aligned16(add));
  dispatch_float(maps, "resize_bilinear_nhwc", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x);
    const T* a = static_cast<const T*>(add);
    T* dst = static_cast<T*>(out);
    if (vector) {
      resize_bilinear_nhwc_kernel<T, 4>
          <<<blocks, kRowThreads, 0, stream>>>(src, a, add_maps, axes, dst, rows, ih, iw, oh, w, c, scale_h, scale_w);
    } else {
      resize_bilinear_nhwc_kernel<T, 1>
          <<<blocks, kRowThreads, 0, stream>>>(src, a, add_maps, axes, dst, rows, ih, iw, oh, w, c, scale_h, scale_w);
    }
  });
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace lingbot::cuda::kernels
