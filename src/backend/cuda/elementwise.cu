// Elementwise kernels: fill, dtype conversion, activations, additions, the
// AdaLN modulation and the residual update that follows a linear layer.
//
// Shape of every kernel: a grid-stride loop. Where the aggregator calls a
// kernel on its big bfloat16 token matrices ([N, 1024] and [N, 4096]), the
// loop moves 16-byte packs (8 bfloat16 or 4 float32) when all pointers are
// 16-byte aligned, and finishes the last n % pack elements one by one.
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

namespace lingbot::cuda::kernels {

namespace {

// ---- fill and convert -----------------------------------------------------

template <typename T>
__global__ void fill_kernel(T* data, int64_t n, float value) {
  const T v = from_float<T>(value);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    data[i] = v;
}

template <typename S, typename D>
__global__ void convert_kernel(const S* src, D* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = from_float<D>(to_float(src[i]));
}

// ---- maps over one or two inputs --------------------------------------------
// out[i] = f(a[i]) or f(a[i], b[i]). kVec: a, b and out are 16-byte aligned,
// so element groups [j * P, j * P + P) move as packs. out may alias a or b: each
// element is read and written by the same thread.

struct UnaryOp {
  Unary op;
  __device__ float operator()(float x) const {
    switch (op) {
      case Unary::Relu: return relu(x);
      case Unary::Silu: return silu(x);
      case Unary::Gelu: return gelu_erf(x);
    }
    return x;
  }
};

template <typename T, bool kVec>
__global__ void unary_kernel(const T* x, T* out, int64_t n, UnaryOp op) {
  constexpr int P = kPack<T>;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  int64_t scalar_from = 0;
  if constexpr (kVec) {
    const int64_t packs = n / P;
    for (int64_t j = i; j < packs; j += stride) {
      float v[P];
      load_pack(x + j * P, v);
#pragma unroll
      for (int e = 0; e < P; ++e) v[e] = op(v[e]);
      store_pack(out + j * P, v);
    }
    scalar_from = packs * P;
  }
  for (int64_t e = scalar_from + i; e < n; e += stride) out[e] = from_float<T>(op(to_float(x[e])));
}

template <typename T, bool kVec>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n) {
  constexpr int P = kPack<T>;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  int64_t scalar_from = 0;
  if constexpr (kVec) {
    const int64_t packs = n / P;
    for (int64_t j = i; j < packs; j += stride) {
      float va[P], vb[P];
      load_pack(a + j * P, va);
      load_pack(b + j * P, vb);
#pragma unroll
      for (int e = 0; e < P; ++e) va[e] += vb[e];
      store_pack(out + j * P, va);
    }
    scalar_from = packs * P;
  }
  for (int64_t e = scalar_from + i; e < n; e += stride) out[e] = from_float<T>(to_float(a[e]) + to_float(b[e]));
}

// x[r, c] += y[c] for x seen as [rows, m] (rows_grid).
template <typename X, typename Y>
__global__ void add_broadcast_kernel(X* x, int64_t rows, const Y* y, int64_t m) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    X* xr = x + r * m;
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < m; c += int64_t{gridDim.x} * blockDim.x)
      xr[c] = from_float<X>(to_float(xr[c]) + to_float(y[c]));
  }
}

// mod [rows, 3 * cols] = [shift | scale | gate] per row.
template <typename T>
__global__ void adaln_kernel(const T* xn, const T* mod, const T* residual, T* out, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const T* m = mod + r * 3 * cols;
    const float shift = to_float(m[c]), scale = to_float(m[cols + c]), gate = to_float(m[2 * cols + c]);
    out[i] = from_float<T>(gate * (to_float(xn[i]) * (1.0f + scale) + shift) + to_float(residual[i]));
  }
}

// residual[r, c] += gamma[c] * y[r, c]. kVec: cols is a multiple of the pack
// and residual, y and gamma are 16-byte aligned, so a pack of P elements lies
// in one row and all three move with 16-byte loads.
template <typename T, bool kVec>
__global__ void residual_kernel(T* residual, const float* y, const float* gamma, int64_t rows, int64_t cols) {
  constexpr int P = kPack<T>;
  const int64_t n = rows * cols;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if constexpr (kVec) {
    for (int64_t j = i; j < n / P; j += stride) {
      const int64_t first = j * P, c0 = first % cols;
      float r[P], v[P], g[P];
      load_pack(residual + first, r);
      load_floats<P>(y + first, v);
      if (gamma) {
        load_floats<P>(gamma + c0, g);
      } else {
#pragma unroll
        for (int e = 0; e < P; ++e) g[e] = 1.0f;
      }
#pragma unroll
      for (int e = 0; e < P; ++e) r[e] += gamma ? v[e] * g[e] : v[e];
      store_pack(residual + first, r);
    }
  } else {
    for (int64_t e = i; e < n; e += stride) {
      float v = y[e];
      if (gamma) v *= gamma[e % cols];
      residual[e] = from_float<T>(to_float(residual[e]) + v);
    }
  }
}

// x[b, ch, :] += bias[ch]; rows (b, ch) of `plane` elements (rows_grid).
__global__ void channel_bias_kernel(float* x, const float* bias, int64_t rows, int64_t channels, int64_t plane) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float* xr = x + r * plane;
    const float v = bias[r % channels];
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < plane; c += int64_t{gridDim.x} * blockDim.x)
      xr[c] += v;
  }
}

}  // namespace

void fill(void* data, DType dtype, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_float_or_half(dtype, "fill", [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(data), n, value);
  });
  LB_CUDA_CHECK_LAUNCH();
}

void convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_float_or_half(src_type, "convert", [&](auto s) {
    dispatch_float_or_half(dst_type, "convert", [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      convert_kernel<S, D><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const S*>(src), static_cast<D*>(dst), n);
    });
  });
  LB_CUDA_CHECK_LAUNCH();
}

void unary(const void* x, void* out, DType dtype, int64_t n, Unary op, cudaStream_t stream) {
  if (n == 0) return;
  const bool vec = aligned16(x) && aligned16(out);
  dispatch_float(dtype, "activation", [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x);
    T* po = static_cast<T*>(out);
    if (vec) {
      unary_kernel<T, true><<<grid_for(n / kPack<T> + 1), kThreads, 0, stream>>>(px, po, n, UnaryOp{op});
    } else {
      unary_kernel<T, false><<<grid_for(n), kThreads, 0, stream>>>(px, po, n, UnaryOp{op});
    }
  });
  LB_CUDA_CHECK_LAUNCH();
}

void add(const void* a, const void* b, void* out, DType dtype, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const bool vec = aligned16(a) && aligned16(b) && aligned16(out);
  dispatch_float(dtype, "add", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    if (vec) {
      add_kernel<T, true><<<grid_for(n / kPack<T> + 1), kThreads, 0, stream>>>(pa, pb, po, n);
    } else {
      add_kernel<T, false><<<grid_for(n), kThreads, 0, stream>>>(pa, pb, po, n);
    }
  });
  LB_CUDA_CHECK_LAUNCH();
}

void add_broadcast(void* x, DType x_type, int64_t n, const void* y, DType y_type, int64_t m, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_float(x_type, "add_broadcast", [&](auto xt) {
    dispatch_float(y_type, "add_broadcast", [&](auto yt) {
      using X = decltype(xt);
      using Y = decltype(yt);
      add_broadcast_kernel<X, Y><<<rows_grid(n / m, m), kThreads, 0, stream>>>(static_cast<X*>(x), n / m,
                                                                               static_cast<const Y*>(y), m);
    });
  });
  LB_CUDA_CHECK_LAUNCH();
}

void adaln_modulate(const void* xn, const void* mod, const void* residual, void* out, DType dtype, int64_t rows,
                    int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  dispatch_float(dtype, "adaln_modulate", [&](auto tag) {
    using T = decltype(tag);
    adaln_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        static_cast<const T*>(xn), static_cast<const T*>(mod), static_cast<const T*>(residual), static_cast<T*>(out),
        rows, cols);
  });
  LB_CUDA_CHECK_LAUNCH();
}

void residual_update(void* residual, DType dtype, const float* y, const float* gamma, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  dispatch_float(dtype, "linear_residual", [&](auto tag) {
    using T = decltype(tag);
    T* r = static_cast<T*>(residual);
    if (cols % kPack<T> == 0 && aligned16(residual) && aligned16(y) && (gamma == nullptr || aligned16(gamma))) {
      residual_kernel<T, true><<<grid_for(n / kPack<T> + 1), kThreads, 0, stream>>>(r, y, gamma, rows, cols);
    } else {
      residual_kernel<T, false><<<grid_for(n), kThreads, 0, stream>>>(r, y, gamma, rows, cols);
    }
  });
  LB_CUDA_CHECK_LAUNCH();
}

void add_channel_bias(float* x, const float* bias, int64_t batches, int64_t channels, int64_t plane,
                      cudaStream_t stream) {
  const int64_t n = batches * channels * plane;
  if (n == 0) return;
  channel_bias_kernel<<<rows_grid(batches * channels, plane), kThreads, 0, stream>>>(x, bias, batches * channels,
                                                                                    channels, plane);
  LB_CUDA_CHECK_LAUNCH();
}

}  // namespace lingbot::cuda::kernels
