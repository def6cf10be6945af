// CPU ops on token matrices: linear layers, LayerNorm, q/k/v preparation,
// attention, element-wise arithmetic and row copies. float32 throughout, as
// upstream's fp32 run (PyTorch's CPU LayerNorm also sums its moments in
// float); loops are written so that they vectorise.
#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_math.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace lingbot::cpu {

namespace {

// y[r, c] = act(y[r, c] + bias[c]); one loop per activation so that each
// vectorises (gelu_vectorizable: vector_math.h).
void apply_bias_activation(float* y, int64_t rows, int64_t cols, const float* bias, Activation act) {
#pragma omp parallel for schedule(static) if (parallel_worth(rows * cols))
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
    if (bias) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    }
    if (act == Activation::Gelu) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] = gelu_vectorizable(row[c]);
    } else if (act == Activation::Relu) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) row[c] = row[c] > 0.0f ? row[c] : 0.0f;
    }
  }
}

// In-place LayerNorm of one vector of n floats. Two passes (mean, then the
// mean of squared deviations: no cancellation), summed in double: float
// sums lost up to 4e-5 (relative) on inputs far from zero (a mean of 100)
// where the compiler vectorised them narrowly or not at all (the sanitizer
// build has no -march flags); double sums still vectorise.
inline void normalize(float* x, int64_t n, const float* w, const float* b, float eps) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double squares = 0.0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    squares += d * d;
  }
  const double inv = 1.0 / std::sqrt(squares / static_cast<double>(n) + eps);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float v = static_cast<float>((x[i] - mean) * inv);
    if (w) v *= w[i];
    if (b) v += b[i];
    x[i] = v;
  }
}

// Rotate one head vector in place by the angles of one table row.
inline void rotate(float* x, int head_dim, const float* cos, const float* sin, RopeTable::Pairs pairs) {
  const int n_angles = head_dim / 2;
  if (pairs == RopeTable::Pairs::Interleaved) {
    for (int j = 0; j < n_angles; ++j) {
      const float a = x[2 * j], b = x[2 * j + 1];
      x[2 * j] = a * cos[j] - b * sin[j];
      x[2 * j + 1] = a * sin[j] + b * cos[j];
    }
    return;
  }
  // HalfSplit: two halves (y then x); inside a half of size h, element i
  // pairs with i + h/2 and uses angle (half * h/2 + i).
  const int half = head_dim / 2;
  const int quarter = half / 2;
  for (int part = 0; part < 2; ++part) {
    float* p = x + part * half;
    const float* c = cos + part * quarter;
    const float* s = sin + part * quarter;
    for (int i = 0; i < quarter; ++i) {
      const float a = p[i], b = p[i + quarter];
      p[i] = a * c[i] - b * s[i];
      p[i + quarter] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& out, Activation act) {
  const auto [N, K, M] = contracts::check_linear(contract(), x, w, b, out);
  gemm_abt(N, M, K, x.f32(), K, w.f32(), K, out.f32(), M);
  apply_bias_activation(out.f32(), N, M, b ? b->f32() : nullptr, act);
}

void CpuBackend::linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                                 Tensor& residual) {
  const auto [N, K, M] = contracts::check_linear_residual(contract(), x, w, b, gamma, residual);
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(N * M));
  gemm_abt(N, M, K, x.f32(), K, w.f32(), K, scratch.data(), M);
  const float* bias = b ? b->f32() : nullptr;
  const float* g = gamma ? gamma->f32() : nullptr;
  float* r = residual.f32();
  const float* y = scratch.data();
#pragma omp parallel for schedule(static) if (parallel_worth(N * M))
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t c = 0; c < M; ++c) {
      float v = y[i * M + c] + (bias ? bias[c] : 0.0f);
      if (g) v *= g[c];
      r[i * M + c] += v;
    }
  }
}

void CpuBackend::layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& out) {
  const auto [N, C] = contracts::check_layer_norm(contract(), x, w, b, out);
  const float* src = x.f32();
  float* dst = out.f32();
  const float* wp = w ? w->f32() : nullptr;
  const float* bp = b ? b->f32() : nullptr;
#pragma omp parallel for schedule(static) if (parallel_worth(N * C))
  for (int64_t i = 0; i < N; ++i) {
    if (dst != src) std::memcpy(dst + i * C, src + i * C, static_cast<size_t>(C) * sizeof(float));
    normalize(dst + i * C, C, wp, bp, eps);
  }
}

void CpuBackend::split_qkv(const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm,
                           const RopeTable* rope, Tensor& q, Tensor& k, Tensor& v) {
  const auto [N, C] = contracts::check_split_qkv(contract(), qkv, num_heads, head_dim, norm, rope, q, k, v);
  const int64_t table_rows = rope ? rope->cos.dim(0) : 0;
  const float* src = qkv.f32();
  float* outs[3] = {q.f32(), k.f32(), v.f32()};
#pragma omp parallel for schedule(static) if (parallel_worth(N * 3 * C))
  for (int64_t t = 0; t < N; ++t) {
    for (int s = 0; s < 3; ++s) {
      float* dst = outs[s] + t * C;
      std::memcpy(dst, src + (t * 3 + s) * C, static_cast<size_t>(C) * sizeof(float));
      if (s == 2) continue;  // v is used as is
      for (int h = 0; h < num_heads; ++h) {
        float* x = dst + static_cast<int64_t>(h) * head_dim;
        if (norm) {
          const Tensor* nw = s == 0 ? norm->q_weight : norm->k_weight;
          const Tensor* nb = s == 0 ? norm->q_bias : norm->k_bias;
          normalize(x, head_dim, nw ? nw->f32() : nullptr, nb ? nb->f32() : nullptr, norm->eps);
        }
        if (rope) {
          const int64_t row = t % table_rows;
          rotate(x, head_dim, rope->cos.f32() + row * (head_dim / 2), rope->sin.f32() + row * (head_dim / 2),
                 rope->pairs);
        }
      }
    }
  }
}

void CpuBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads,
                           int head_dim, Tensor& out) {
  const auto [n, C] = contracts::check_attention(contract(), q, k, v, groups, num_heads, head_dim, out);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int g = 0; g < groups; ++g) {
    const int64_t off = g * n * C;
    const KvSpan span{k.f32() + off, v.f32() + off, n};
    cpu::attention(q.f32() + off, n, std::span<const KvSpan>(&span, 1), num_heads, head_dim, scale,
                   out.f32() + off);
  }
}

void CpuBackend::copy_rows(const Tensor& src, Tensor& dst, const RowCopy& c) {
  contracts::check_copy_rows(contract(), src, dst, c);
  if (c.rows == 0) return;
  const size_t esize = dtype_size(src.dtype());
  for (int64_t b = 0; b < c.batches; ++b) {
    const int64_t s0 = c.src_offset + b * c.src_batch_stride;
    const int64_t d0 = c.dst_offset + b * c.dst_batch_stride;
    std::memcpy(static_cast<char*>(dst.data()) + static_cast<size_t>(d0 * c.cols) * esize,
                static_cast<const char*>(src.data()) + static_cast<size_t>(s0 * c.cols) * esize,
                static_cast<size_t>(c.rows * c.cols) * esize);
  }
}

void CpuBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) {
  const auto [n, ca, cb] = contracts::check_concat_cols(contract(), a, b, out);
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* po = out.f32();
#pragma omp parallel for schedule(static) if (parallel_worth(n * (ca + cb)))
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(po + i * (ca + cb), pa + i * ca, static_cast<size_t>(ca) * sizeof(float));
    std::memcpy(po + i * (ca + cb) + ca, pb + i * cb, static_cast<size_t>(cb) * sizeof(float));
  }
}

void CpuBackend::add_broadcast(Tensor& x, const Tensor& y) {
  contracts::check_add_broadcast(contract(), x, y);
  // y repeats over x (the contract checks that m divides n): one pass per
  // repetition, no division per element.
  const int64_t n = x.numel(), m = y.numel();
  const int64_t repeats = n / m;
  float* px = x.f32();
  const float* py = y.f32();
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (int64_t r = 0; r < repeats; ++r) {
    float* row = px + r * m;
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) row[i] += py[i];
  }
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  contracts::check_add(contract(), a, b, out);
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* po = out.f32();
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
}

void CpuBackend::relu(const Tensor& x, Tensor& out) {
  contracts::check_unary(contract(), "relu", x, out);
  const float* px = x.f32();
  float* po = out.f32();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
}

void CpuBackend::silu(const Tensor& x, Tensor& out) {
  contracts::check_unary(contract(), "silu", x, out);
  const float* px = x.f32();
  float* po = out.f32();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) po[i] = px[i] / (1.0f + std::exp(-px[i]));
}

void CpuBackend::adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual, Tensor& out) {
  const auto [N, C] = contracts::check_adaln_modulate(contract(), xn, mod, residual, out);
  const float* x = xn.f32();
  const float* m = mod.f32();
  const float* r = residual.f32();
  float* o = out.f32();
#pragma omp parallel for schedule(static) if (parallel_worth(N * C))
  for (int64_t i = 0; i < N; ++i) {
    const float* shift = m + i * 3 * C;
    const float* scale = shift + C;
    const float* gate = scale + C;
    for (int64_t c = 0; c < C; ++c)
      o[i * C + c] = gate[c] * (x[i * C + c] * (1.0f + scale[c]) + shift[c]) + r[i * C + c];
  }
}

}  // namespace lingbot::cpu
