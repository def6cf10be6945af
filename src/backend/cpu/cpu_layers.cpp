// CPU ops on token matrices: linear layers, LayerNorm, q/k/v preparation,
// attention, element-wise arithmetic and row copies. float32 arithmetic
// throughout, as upstream's fp32 run, except the bf16 mode's matrix products
// (onednn_matmul.h); there LayerNorm, q/k/v preparation and attention read
// and write bfloat16 token matrices but compute on float32 copies of rows.
// Loops are written so that they vectorise.
#include "backend/cpu/attention.h"
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/bf16_convert.h"
#include "backend/cpu/bf16_weights_gemv.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/linear_amx.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_math.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace lingbot::cpu {

float* scratch_room(std::vector<float>& buffer, int64_t n) {
  if (buffer.size() < static_cast<size_t>(n)) {
    buffer = std::vector<float>();  // freed first: the old and the new never coexist
    buffer.resize(static_cast<size_t>(n));
  }
  return buffer.data();
}

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

// Rows of a float32 or bfloat16 token matrix, read into and written from
// float32 row buffers (bf16 widens exactly; writing rounds to nearest even).
struct Rows {
  const Tensor& t;
  int64_t cols;
  bool bf16() const { return t.dtype() == DType::BF16; }
  // Row i as float32: a pointer into t, or `buffer` filled from it.
  const float* read(int64_t i, float* buffer) const {
    if (!bf16()) return t.f32() + i * cols;
    f32_from_bf16_row(t.data_as<const uint16_t>() + i * cols, buffer, cols);
    return buffer;
  }
  // Where row i is to be computed: in place (float32) or in `buffer`.
  float* target(int64_t i, float* buffer) const { return bf16() ? buffer : t.f32() + i * cols; }
  void commit(int64_t i, const float* row) const {
    if (bf16()) bf16_from_f32_row(row, t.data_as<uint16_t>() + i * cols, cols);
  }
};

// A float32 or bfloat16 tensor as bfloat16: its own data, or a copy rounded
// into `buffer`.
const uint16_t* as_bf16(const Tensor& t, std::vector<uint16_t>& buffer) {
  if (t.dtype() == DType::BF16) return t.data_as<const uint16_t>();
  buffer.resize(static_cast<size_t>(t.numel()));
  bf16_from_f32(t.f32(), buffer.data(), t.numel());
  return buffer.data();
}

// Elements [first, first + count) of a float32 or bfloat16 tensor as
// float32: its own data, or widened into `into`.
const float* as_f32(const Tensor& t, int64_t first, int64_t count, float* into) {
  if (t.dtype() == DType::F32) return t.f32() + first;
  LB_CHECK(t.dtype() == DType::BF16, "cpu backend: expected float32 or bfloat16, got {}", t.describe());
  f32_from_bf16(t.data_as<const uint16_t>() + first, into, count);
  return into;
}

// A float32 or bfloat16 tensor as float32: its own data, or a widened copy.
const float* as_f32(const Tensor& t, std::vector<float>& buffer) {
  if (t.dtype() == DType::F32) return t.f32();
  return as_f32(t, 0, t.numel(), scratch_room(buffer, t.numel()));
}

// The bf16 mode's element-wise ops on bfloat16 operands (the op contract
// allows them; the model's own calls pass float32 there): they compute in
// float32 on widened copies and round their output once. This path
// allocates its copies per call: it is for completeness, not speed.
bool any_bf16(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype() == DType::BF16) return true;
  return false;
}
Tensor widened(const Tensor& t) { return t.dtype() == DType::F32 ? t : t.to_dtype(DType::F32); }
// out = result (float32), rounded when out is bfloat16.
void store(const Tensor& result, Tensor& out) {
  if (out.dtype() == DType::BF16) {
    bf16_from_f32(result.f32(), out.data_as<uint16_t>(), out.numel());
  } else if (out.data() != result.data()) {
    out.copy_from(result);
  }
}

}  // namespace

Tensor CpuBackend::row_major_bf16(const Tensor& w, WeightLayout layout) const {
  // The model never multiplies a float32 x by the AMX-packed weights (its
  // Linear layers take bf16 activations in the bf16 mode); other callers get
  // the product right, unpacking per call.
  return layout == WeightLayout::AmxTiles ? packed_weights_.unpacked(*matmuls_, w) : w;
}

void CpuBackend::linear_bf16(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* b, Activation act,
                             MatmulDst kind, void* dst, int64_t n, int64_t k, int64_t m) {
  const float* bias = b ? b->f32() : nullptr;
  thread_local std::vector<uint16_t> x_bf16;
  if (layout == WeightLayout::AmxTiles) {
    linear_amx(as_bf16(x, x_bf16), n, k, w.data_as<const uint16_t>(), m, bias, act, kind, dst);
    return;
  }
  if (bf16_products_ != Bf16Products::WidenedSgemm) {  // oneDNN's products (AmxTiles: a shape without tiles)
    matmuls_->run({n, k, m}, DType::BF16, as_bf16(x, x_bf16), w.data(), bias, act, kind, dst, layout);
    return;
  }
  LB_CHECK(layout == WeightLayout::RowMajor, "internal error: linear: packed weights without oneDNN's products");
  // Widened: bf16 values are exact in float32, so sgemm multiplies the same
  // numbers as a bf16 product would, and sums them in float32 too.
  // The widened x first, then (for a bfloat16 output) the float32 products,
  // 64 bytes apart at least.
  const int64_t x_floats = x.dtype() == DType::F32 ? 0 : (n * k + 15) / 16 * 16;
  float* const products = scratch_room(scratch_.products, x_floats + (kind == MatmulDst::Bf16 ? n * m : 0));
  const float* xs = as_f32(x, 0, n * k, products);
  const float* ws = as_f32(w, scratch_.weights);
  if (kind == MatmulDst::AddIntoF32) {  // dst += x w^T + b: the bias first, then sgemm accumulates
    float* r = static_cast<float*>(dst);
    if (bias) {
#pragma omp parallel for schedule(static) if (parallel_worth(n * m))
      for (int64_t i = 0; i < n; ++i) {
#pragma omp simd
        for (int64_t c = 0; c < m; ++c) r[i * m + c] += bias[c];
      }
    }
    gemm_abt(n, m, k, xs, k, ws, k, r, m, /*accumulate=*/true);
    return;
  }
  float* y = static_cast<float*>(dst);
  if (kind == MatmulDst::Bf16) y = products + x_floats;
  gemm_abt(n, m, k, xs, k, ws, k, y, m);
  apply_bias_activation(y, n, m, bias, act);
  if (kind == MatmulDst::Bf16) bf16_from_f32(y, static_cast<uint16_t*>(dst), n * m);
}

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& out, Activation act) {
  const auto [N, K, M] = contracts::check_linear(contract(), x, w, b, out);
  const WeightLayout layout = packed_weights_.layout_of(w);  // packed: read only by oneDNN's products and ours
  const bool packed = layout != WeightLayout::RowMajor;
  if (x.dtype() == DType::F32 && w.dtype() == DType::BF16 && layout != WeightLayout::Packed) {
    // Weights kept in bf16, a float32 product (x is not rounded).
    LB_CHECK(out.dtype() == DType::F32, "linear: bfloat16 weights under a float32 x write float32 output, got {}",
             out.describe());
    bf16_weights_gemv(x.f32(), N, K, row_major_bf16(w, layout).data_as<const uint16_t>(), M,
                      b ? b->f32() : nullptr, out.f32(), /*accumulate=*/false);
    if (act != Activation::None) apply_bias_activation(out.f32(), N, M, nullptr, act);
    return;
  }
  if (w.dtype() == DType::BF16) {
    linear_bf16(x, w, layout, b, act, out.dtype() == DType::BF16 ? MatmulDst::Bf16 : MatmulDst::F32, out.data(), N,
                K, M);
    return;
  }
  LB_CHECK(w.dtype() == DType::F32, "linear: the cpu backend takes float32 or bfloat16 weights, got {}",
           w.describe());
  LB_CHECK(out.dtype() == DType::F32, "linear: float32 weights write float32 output, got {}", out.describe());
  if (packed) {  // the fp32 mode's encoder and aggregator: bias and activation inside the product
    matmuls_->run({N, K, M}, DType::F32, as_f32(x, scratch_.products), w.data(), b ? b->f32() : nullptr, act,
                  MatmulDst::F32, out.data(), WeightLayout::Packed);
    return;
  }
  gemm_abt(N, M, K, as_f32(x, scratch_.products), K, w.f32(), K, out.f32(), M);
  apply_bias_activation(out.f32(), N, M, b ? b->f32() : nullptr, act);
}

void CpuBackend::linear_residual(const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* gamma,
                                 Tensor& residual) {
  const auto [N, K, M] = contracts::check_linear_residual(contract(), x, w, b, gamma, residual);
  if (residual.dtype() == DType::BF16) {
    Tensor sum = residual.to_dtype(DType::F32);
    linear_residual(x, w, b, gamma, sum);
    store(sum, residual);
    return;
  }
  const WeightLayout layout = packed_weights_.layout_of(w);  // packed: read only by oneDNN's products and ours
  const bool packed = layout != WeightLayout::RowMajor;
  // A float32 product, as in linear().
  const bool bf16_rows = x.dtype() == DType::F32 && w.dtype() == DType::BF16 && layout != WeightLayout::Packed;
  if (bf16_rows && gamma == nullptr) {  // bf16-kept weights
    bf16_weights_gemv(x.f32(), N, K, row_major_bf16(w, layout).data_as<const uint16_t>(), M, b ? b->f32() : nullptr,
                      residual.f32(), /*accumulate=*/true);
    return;
  }
  if (w.dtype() == DType::BF16 && gamma == nullptr) {  // the model's case: gains are folded into w
    linear_bf16(x, w, layout, b, Activation::None, MatmulDst::AddIntoF32, residual.data(), N, K, M);
    return;
  }
  if (w.dtype() == DType::F32 && packed && gamma == nullptr) {  // the fp32 mode's: the update inside the product
    matmuls_->run({N, K, M}, DType::F32, as_f32(x, scratch_.products), w.data(), b ? b->f32() : nullptr,
                  Activation::None, MatmulDst::AddIntoF32, residual.data(), WeightLayout::Packed);
    return;
  }
  float* const sums = scratch_room(scratch_.sums, N * M);
  if (bf16_rows) {
    bf16_weights_gemv(x.f32(), N, K, row_major_bf16(w, layout).data_as<const uint16_t>(), M, nullptr, sums,
                      /*accumulate=*/false);
  } else if (w.dtype() == DType::BF16) {
    linear_bf16(x, w, layout, nullptr, Activation::None, MatmulDst::F32, sums, N, K, M);
  } else if (packed) {
    matmuls_->run({N, K, M}, DType::F32, as_f32(x, scratch_.products), w.data(), nullptr, Activation::None,
                  MatmulDst::F32, sums, WeightLayout::Packed);
  } else {
    gemm_abt(N, M, K, as_f32(x, scratch_.products), K, w.f32(), K, sums, M);
  }
  const float* bias = b ? b->f32() : nullptr;
  const float* g = gamma ? gamma->f32() : nullptr;
  float* r = residual.f32();
  const float* y = sums;
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
  const float* wp = w ? w->f32() : nullptr;
  const float* bp = b ? b->f32() : nullptr;
  if (x.dtype() == DType::F32 && out.dtype() == DType::F32) {
    const float* src = x.f32();
    float* dst = out.f32();
#pragma omp parallel for schedule(static) if (parallel_worth(N * C))
    for (int64_t i = 0; i < N; ++i) {
      if (dst != src) std::memcpy(dst + i * C, src + i * C, static_cast<size_t>(C) * sizeof(float));
      normalize(dst + i * C, C, wp, bp, eps);
    }
    return;
  }
  // A bfloat16 side (the bf16 mode: float32 residual in, bf16 out): each row
  // is normalised in float32 and rounded once.
  const Rows in{x, C}, to{out, C};
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(C));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const float* src = in.read(i, row.data());
      if (src != row.data()) std::memcpy(row.data(), src, static_cast<size_t>(C) * sizeof(float));
      normalize(row.data(), C, wp, bp, eps);
      float* dst = to.target(i, row.data());
      if (dst != row.data()) std::memcpy(dst, row.data(), static_cast<size_t>(C) * sizeof(float));
      to.commit(i, row.data());
    }
  }
}

void CpuBackend::split_qkv(const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm,
                           const RopeTable* rope, Tensor& q, Tensor& k, Tensor& v) {
  const auto [N, C] = contracts::check_split_qkv(contract(), qkv, num_heads, head_dim, norm, rope, q, k, v);
  const int64_t table_rows = rope ? rope->cos.dim(0) : 0;
  // Row t * 3 + s of qkv (C wide) is row t of q, k or v (s = 0, 1, 2).
  const Rows src{qkv, C};
  const Rows outs[3] = {{q, C}, {k, C}, {v, C}};
#pragma omp parallel if (parallel_worth(N * 3 * C))
  {
    std::vector<float> in_row, out_row;
    if (src.bf16()) in_row.resize(static_cast<size_t>(C));
    out_row.resize(static_cast<size_t>(C));
#pragma omp for schedule(static)
  for (int64_t t = 0; t < N; ++t) {
    for (int s = 0; s < 3; ++s) {
      float* dst = outs[s].target(t, out_row.data());
      std::memcpy(dst, src.read(t * 3 + s, in_row.data()), static_cast<size_t>(C) * sizeof(float));
      if (s == 2) {  // v is used as is
        outs[s].commit(t, dst);
        continue;
      }
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
      outs[s].commit(t, dst);
    }
  }
  }
}

void CpuBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads,
                           int head_dim, Tensor& out) {
  const auto [n, C] = contracts::check_attention(contract(), q, k, v, groups, num_heads, head_dim, out);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  // The bf16 mode: attention in float32 on widened copies, the output
  // rounded once; one group at a time (groups attend only inside
  // themselves), so the copies are one group's, not every frame's. With
  // bf16 products, bf16 keys and values go to the kernel as they are (it
  // reads them as bf16 anyway) and only q is widened.
  const int64_t group = n * C;
  const bool widens = q.dtype() == DType::BF16 || k.dtype() == DType::BF16 || v.dtype() == DType::BF16 ||
                      out.dtype() == DType::BF16;
  float* const copies = widens ? scratch_room(scratch_.attention, 4 * group) : nullptr;
  const bool bf16_products = attention_products_ == AttentionProducts::Bf16 && q.dtype() == DType::BF16 &&
                             n >= kMinBf16AttentionQueries;
  const bool bf16_keys = bf16_products && k.dtype() == DType::BF16 && v.dtype() == DType::BF16;
  for (int g = 0; g < groups; ++g) {
    const int64_t off = g * group;
    const float* pq = as_f32(q, off, group, copies);
    float* po = out.dtype() == DType::F32 ? out.f32() + off : copies + 3 * group;
    const KvSpan span = bf16_keys ? KvSpan{k.data_as<const uint16_t>() + off, v.data_as<const uint16_t>() + off, n,
                                           KvElement::Bf16}
                                  : KvSpan{as_f32(k, off, group, copies + group), as_f32(v, off, group, copies + 2 * group), n};
    if (bf16_products) {
      cpu::attention_bf16(pq, n, std::span<const KvSpan>(&span, 1), num_heads, head_dim, scale, po);
    } else {
      cpu::attention(pq, n, std::span<const KvSpan>(&span, 1), num_heads, head_dim, scale, po);
    }
    if (out.dtype() == DType::BF16) bf16_from_f32(po, out.data_as<uint16_t>() + off, group);
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
  LB_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(),
           "concat_cols: the cpu backend joins tensors of one dtype, got {}, {} -> {}", a.describe(), b.describe(),
           out.describe());
  const size_t es = dtype_size(out.dtype());
  const char* pa = static_cast<const char*>(a.data());
  const char* pb = static_cast<const char*>(b.data());
  char* po = static_cast<char*>(out.data());
#pragma omp parallel for schedule(static) if (parallel_worth(n * (ca + cb)))
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(po + i * (ca + cb) * es, pa + i * ca * es, static_cast<size_t>(ca) * es);
    std::memcpy(po + (i * (ca + cb) + ca) * es, pb + i * cb * es, static_cast<size_t>(cb) * es);
  }
}

void CpuBackend::add_broadcast(Tensor& x, const Tensor& y) {
  contracts::check_add_broadcast(contract(), x, y);
  if (any_bf16({&x, &y})) {
    Tensor sum = x.to_dtype(DType::F32);
    add_broadcast(sum, widened(y));
    store(sum, x);
    return;
  }
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
  if (any_bf16({&a, &b, &out})) {
    Tensor sum = Tensor::empty(out.shape(), DType::F32);
    add(widened(a), widened(b), sum);
    store(sum, out);
    return;
  }
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* po = out.f32();
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
}

void CpuBackend::relu(const Tensor& x, Tensor& out) {
  contracts::check_unary(contract(), "relu", x, out);
  if (any_bf16({&x, &out})) {
    Tensor result = Tensor::empty(out.shape(), DType::F32);
    relu(widened(x), result);
    store(result, out);
    return;
  }
  const float* px = x.f32();
  float* po = out.f32();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) po[i] = px[i] > 0.0f ? px[i] : 0.0f;
}

void CpuBackend::silu(const Tensor& x, Tensor& out) {
  contracts::check_unary(contract(), "silu", x, out);
  if (any_bf16({&x, &out})) {
    Tensor result = Tensor::empty(out.shape(), DType::F32);
    silu(widened(x), result);
    store(result, out);
    return;
  }
  const float* px = x.f32();
  float* po = out.f32();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (int64_t i = 0; i < n; ++i) po[i] = px[i] / (1.0f + std::exp(-px[i]));
}

void CpuBackend::adaln_modulate(const Tensor& xn, const Tensor& mod, const Tensor& residual, Tensor& out) {
  const auto [N, C] = contracts::check_adaln_modulate(contract(), xn, mod, residual, out);
  if (any_bf16({&xn, &mod, &residual, &out})) {
    Tensor result = Tensor::empty(out.shape(), DType::F32);
    adaln_modulate(widened(xn), widened(mod), widened(residual), result);
    store(result, out);
    return;
  }
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
