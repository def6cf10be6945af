#include "backend/op_contracts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace lingbot::contracts {

namespace {

// "float32", "float32 or bfloat16": the activation dtypes of a target.
std::string activation_dtypes(const Target& t) {
  std::string s(dtype_name(DType::F32));
  for (DType d : {t.compute, t.residual}) {
    const std::string name(dtype_name(d));
    if (s.find(name) == std::string::npos) s += " or " + name;
  }
  return s;
}

// An allocated tensor on the target's device.
void on_device(const Target& t, const char* op, const char* what, const Tensor& x) {
  LB_CHECK(x.defined(), "{}: {} is not allocated", op, what);
  LB_CHECK(x.device() == t.device, "{}: {} {} is not on {}", op, what, x.describe(), device_name(t.device));
}

// An allocated host tensor.
void on_host(const char* op, const char* what, const Tensor& x) {
  LB_CHECK(x.defined(), "{}: {} is not allocated", op, what);
  LB_CHECK(x.is_cpu(), "{}: {} {} is not a host tensor", op, what, x.describe());
}

void activation(const Target& t, const char* op, const char* what, const Tensor& x) {
  on_device(t, op, what, x);
  LB_CHECK(t.activation(x.dtype()), "{}: {} {} is not {}", op, what, x.describe(), activation_dtypes(t));
}

void float32(const Target& t, const char* op, const char* what, const Tensor& x) {
  on_device(t, op, what, x);
  LB_CHECK(x.dtype() == DType::F32, "{}: {} {} is not float32", op, what, x.describe());
}

void floating(const Target& t, const char* op, const char* what, const Tensor& x) {
  on_device(t, op, what, x);
  LB_CHECK(is_floating(x.dtype()), "{}: {} {} is not a float tensor", op, what, x.describe());
}

// `x` on the device, of the dtype of `ref`.
void like(const Target& t, const char* op, const char* what, const Tensor& x, const char* ref_what,
          const Tensor& ref) {
  on_device(t, op, what, x);
  LB_CHECK(x.dtype() == ref.dtype(), "{}: {} {} is not {} like {} {}", op, what, x.describe(),
           dtype_name(ref.dtype()), ref_what, ref.describe());
}

int64_t last_dim(const char* op, const char* what, const Tensor& x) {
  LB_CHECK(x.ndim() >= 1, "{}: {} {} is a scalar", op, what, x.describe());
  return x.dim(-1);
}

// The rows of `x` seen as a matrix of `cols` columns.
int64_t rows_of(const char* op, const char* what, const Tensor& x, int64_t cols) {
  LB_CHECK(cols > 0 && x.numel() % cols == 0, "{}: {} {} is not rows of {}", op, what, x.describe(), cols);
  return x.numel() / cols;
}

// `x` holds a [rows, cols] matrix.
void holds(const char* op, const char* what, const Tensor& x, int64_t rows, int64_t cols) {
  LB_CHECK(x.numel() == rows * cols, "{}: {} {} is not [{}, {}]", op, what, x.describe(), rows, cols);
}

// An optional float32 vector of n elements.
void vector(const Target& t, const char* op, const char* what, const Tensor* v, int64_t n) {
  if (v == nullptr) return;
  float32(t, op, what, *v);
  LB_CHECK(v->numel() == n, "{}: {} {} is not [{}]", op, what, v->describe(), n);
}

Nchw nchw(const Target& t, const char* op, const char* what, const Tensor& x) {
  float32(t, op, what, x);
  LB_CHECK(x.ndim() == 4, "{}: {} {} is not NCHW", op, what, x.describe());
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3)};
}

// Whether two byte ranges [a, a + na) and [b, b + nb) share a byte.
bool overlap(uintptr_t a, uintptr_t na, uintptr_t b, uintptr_t nb) {
  return na > 0 && nb > 0 && a < b + nb && b < a + na;
}

bool overlap(const Tensor& a, const Tensor& b) {
  return overlap(reinterpret_cast<uintptr_t>(a.data()), a.nbytes(), reinterpret_cast<uintptr_t>(b.data()), b.nbytes());
}

// An output apart from an input.
void apart(const char* op, const char* out_what, const Tensor& out, const char* in_what, const Tensor& in) {
  LB_CHECK(!overlap(out, in), "{}: {} {} overlaps {} {}", op, out_what, out.describe(), in_what, in.describe());
}

void apart(const char* op, const char* out_what, const Tensor& out, const char* in_what, const Tensor* in) {
  if (in != nullptr) apart(op, out_what, out, in_what, *in);
}

// An output that may alias an input: that very tensor, or apart from it.
void same_or_apart(const char* op, const char* out_what, const Tensor& out, const char* in_what, const Tensor& in) {
  LB_CHECK(!overlap(out, in) || (out.data() == in.data() && out.nbytes() == in.nbytes()),
           "{}: {} {} overlaps part of {} {} (it may be that tensor, not part of it)", op, out_what, out.describe(),
           in_what, in.describe());
}

}  // namespace

// ---- memory -----------------------------------------------------------------

void check_upload(const Target&, const Tensor& host) { on_host("upload", "host", host); }

void check_upload_into(const Target& t, const Tensor& host, const Tensor& device) {
  const char* op = "upload_into";
  on_host(op, "host", host);
  on_device(t, op, "device", device);
  LB_CHECK(host.shape() == device.shape(), "{}: host {} and device {} differ in shape", op, host.describe(),
           device.describe());
}

void check_download(const Target& t, const Tensor& device) { on_device(t, "download", "device", device); }

void check_download_async(const Target& t, const Tensor& device, const Tensor& host) {
  const char* op = "download_async";
  on_device(t, op, "device", device);
  on_host(op, "host", host);
  LB_CHECK(host.shape() == device.shape() && host.dtype() == device.dtype(),
           "{}: host {} is not of device {}'s shape and dtype", op, host.describe(), device.describe());
}

void check_fill(const Target& t, const Tensor& x) { floating(t, "fill", "tensor", x); }

void check_convert(const Target& t, const Tensor& src, const Tensor& dst) {
  const char* op = "convert";
  floating(t, op, "src", src);
  floating(t, op, "dst", dst);
  LB_CHECK(src.numel() == dst.numel(), "{}: src {} and dst {} differ in element count", op, src.describe(),
           dst.describe());
}

// ---- dense layers -------------------------------------------------------------

namespace {

// x[N, K] w[M, K]^T with an optional bias[M]: what linear and linear_residual share.
LinearDims check_product(const Target& t, const char* op, const Tensor& x, const Tensor& w, const Tensor* b) {
  activation(t, op, "x", x);
  like(t, op, "weight", w, "x", x);
  LB_CHECK(w.ndim() == 2, "{}: weight {} is not a matrix [M, K]", op, w.describe());
  const int64_t m = w.dim(0), k = w.dim(1);
  LB_CHECK(k > 0 && x.numel() % k == 0, "{}: x {} is not rows of weight {}'s K = {}", op, x.describe(), w.describe(),
           k);
  vector(t, op, "bias", b, m);
  return {x.numel() / k, k, m};
}

}  // namespace

LinearDims check_linear(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& out) {
  const char* op = "linear";
  const LinearDims d = check_product(t, op, x, w, b);
  activation(t, op, "out", out);
  holds(op, "out", out, d.n, d.m);
  apart(op, "out", out, "x", x);
  apart(op, "out", out, "weight", w);
  apart(op, "out", out, "bias", b);
  return d;
}

LinearDims check_linear_residual(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b,
                                 const Tensor* gamma, const Tensor& residual) {
  const char* op = "linear_residual";
  const LinearDims d = check_product(t, op, x, w, b);
  vector(t, op, "gamma", gamma, d.m);
  activation(t, op, "residual", residual);
  holds(op, "residual", residual, d.n, d.m);
  apart(op, "residual", residual, "x", x);
  apart(op, "residual", residual, "weight", w);
  apart(op, "residual", residual, "bias", b);
  apart(op, "residual", residual, "gamma", gamma);
  return d;
}

MatrixDims check_layer_norm(const Target& t, const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& out) {
  const char* op = "layer_norm";
  activation(t, op, "x", x);
  activation(t, op, "out", out);
  const int64_t c = last_dim(op, "x", x);
  const int64_t n = rows_of(op, "x", x, c);
  vector(t, op, "weight", w, c);
  vector(t, op, "bias", b, c);
  LB_CHECK(out.numel() == x.numel(), "{}: out {} is not the size of x {}", op, out.describe(), x.describe());
  // In place only between tensors of one dtype: equal sizes in bytes.
  same_or_apart(op, "out", out, "x", x);
  apart(op, "out", out, "weight", w);
  apart(op, "out", out, "bias", b);
  return {n, c};
}

// ---- attention ----------------------------------------------------------------

MatrixDims check_split_qkv(const Target& t, const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm,
                           const RopeTable* rope, const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* op = "split_qkv";
  activation(t, op, "qkv", qkv);
  like(t, op, "q", q, "qkv", qkv);
  like(t, op, "k", k, "qkv", qkv);
  like(t, op, "v", v, "qkv", qkv);
  LB_CHECK(num_heads > 0 && head_dim > 0, "{}: {} heads of dimension {}", op, num_heads, head_dim);
  const int64_t c = int64_t{num_heads} * head_dim;
  LB_CHECK(qkv.numel() % (3 * c) == 0, "{}: qkv {} is not rows of 3 x {} heads x {}", op, qkv.describe(), num_heads,
           head_dim);
  const int64_t n = qkv.numel() / (3 * c);
  holds(op, "q", q, n, c);
  holds(op, "k", k, n, c);
  holds(op, "v", v, n, c);
  if (norm != nullptr) {
    vector(t, op, "q_norm weight", norm->q_weight, head_dim);
    vector(t, op, "q_norm bias", norm->q_bias, head_dim);
    vector(t, op, "k_norm weight", norm->k_weight, head_dim);
    vector(t, op, "k_norm bias", norm->k_bias, head_dim);
  }
  if (rope != nullptr) {
    float32(t, op, "rope cos", rope->cos);
    float32(t, op, "rope sin", rope->sin);
    LB_CHECK(rope->cos.ndim() == 2 && rope->cos.dim(0) > 0 && rope->cos.dim(1) == head_dim / 2 &&
                 rope->sin.shape() == rope->cos.shape(),
             "{}: rope table cos {} / sin {} is not [rows, {}] for head_dim {}", op, rope->cos.describe(),
             rope->sin.describe(), head_dim / 2, head_dim);
    const bool half_split = rope->pairs == RopeTable::Pairs::HalfSplit;
    LB_CHECK(head_dim % (half_split ? 4 : 2) == 0, "{}: {} RoPE needs head_dim divisible by {}, got {}", op,
             half_split ? "half-split" : "interleaved", half_split ? 4 : 2, head_dim);
  }
  // Outputs apart from the input and from each other.
  apart(op, "q", q, "qkv", qkv);
  apart(op, "k", k, "qkv", qkv);
  apart(op, "v", v, "qkv", qkv);
  apart(op, "q", q, "k", k);
  apart(op, "q", q, "v", v);
  apart(op, "k", k, "v", v);
  return {n, c};
}

MatrixDims check_attention(const Target& t, const Tensor& q, const Tensor& k, const Tensor& v, int groups,
                           int num_heads, int head_dim, const Tensor& out) {
  const char* op = "attention";
  activation(t, op, "q", q);
  like(t, op, "k", k, "q", q);
  like(t, op, "v", v, "q", q);
  like(t, op, "out", out, "q", q);
  LB_CHECK(groups > 0 && num_heads > 0 && head_dim > 0, "{}: {} groups of {} heads of dimension {}", op, groups,
           num_heads, head_dim);
  const int64_t c = int64_t{num_heads} * head_dim;
  LB_CHECK(q.numel() % (c * groups) == 0, "{}: q {} is not {} equal groups of rows of {} heads x {}", op,
           q.describe(), groups, num_heads, head_dim);
  LB_CHECK(k.numel() == q.numel() && v.numel() == q.numel() && out.numel() == q.numel(),
           "{}: q {}, k {}, v {} and out {} differ in size", op, q.describe(), k.describe(), v.describe(),
           out.describe());
  apart(op, "out", out, "q", q);
  apart(op, "out", out, "k", k);
  apart(op, "out", out, "v", v);
  return {q.numel() / (c * groups), c};
}

// ---- element-wise and data movement ---------------------------------------------

namespace {

// The row where block `b` starts: offset + b * stride, without overflow.
int64_t block_start(const char* side, int64_t offset, int64_t stride, int64_t b) {
  int64_t step = 0, start = 0;
  LB_CHECK(!__builtin_mul_overflow(stride, b, &step) && !__builtin_add_overflow(offset, step, &start),
           "copy_rows: block {} of {}_offset {} + {}_batch_stride {} overflows", b, side, offset, side, stride);
  return start;
}

// Block b's rows [start, start + rows) inside a tensor of `total` rows.
void block_in_range(const char* verb, const char* side, const Tensor& x, int64_t total, int64_t b, int64_t start,
                    int64_t rows) {
  const int64_t end = start > std::numeric_limits<int64_t>::max() - rows ? std::numeric_limits<int64_t>::max()
                                                                          : start + rows;
  LB_CHECK(start >= 0, "copy_rows: block {} {} {} rows [{}, {}), before {}'s first row ({} {})", b, verb, side,
           start, end, side, side, x.describe());
  LB_CHECK(start <= total - rows, "copy_rows: block {} {} {} rows [{}, {}), past {}'s {} rows ({} {})", b, verb, side,
           start, end, side, total, side, x.describe());
}

}  // namespace

void check_copy_rows(const Target& t, const Tensor& src, const Tensor& dst, const RowCopy& c) {
  const char* op = "copy_rows";
  on_device(t, op, "src", src);
  on_device(t, op, "dst", dst);
  LB_CHECK(src.dtype() == dst.dtype(), "{}: src {} and dst {} differ in dtype", op, src.describe(), dst.describe());
  LB_CHECK(c.batches >= 0 && c.rows >= 0 && c.src_offset >= 0 && c.dst_offset >= 0,
           "{}: negative batches {}, rows {}, src_offset {} or dst_offset {}", op, c.batches, c.rows, c.src_offset,
           c.dst_offset);
  LB_CHECK(c.cols > 0 && src.numel() % c.cols == 0, "{}: src {} is not rows of {}", op, src.describe(), c.cols);
  LB_CHECK(dst.numel() % c.cols == 0, "{}: dst {} is not rows of {}", op, dst.describe(), c.cols);
  if (c.batches == 0 || c.rows == 0) return;
  const int64_t src_rows = src.numel() / c.cols, dst_rows = dst.numel() / c.cols;
  // A block's first row is linear in b: the first and the last block bound them all.
  const int64_t last = c.batches - 1;
  const int64_t s_last = block_start("src", c.src_offset, c.src_batch_stride, last);
  const int64_t d_last = block_start("dst", c.dst_offset, c.dst_batch_stride, last);
  block_in_range("reads", "src", src, src_rows, 0, c.src_offset, c.rows);
  block_in_range("reads", "src", src, src_rows, last, s_last, c.rows);
  block_in_range("writes", "dst", dst, dst_rows, 0, c.dst_offset, c.rows);
  block_in_range("writes", "dst", dst, dst_rows, last, d_last, c.rows);
  // The blocks are one write each: they must not overlap in dst (a zero dst
  // stride only for one block). In range, |stride| < dst's rows: no overflow.
  LB_CHECK(c.batches == 1 || c.dst_batch_stride >= c.rows || -c.dst_batch_stride >= c.rows,
           "{}: {} dst blocks of {} rows, {} rows apart, overlap (dst {})", op, c.batches, c.rows,
           c.dst_batch_stride, dst.describe());
  // The rows read and the rows written must not share memory.
  const auto row_bytes = static_cast<uintptr_t>(c.cols) * dtype_size(src.dtype());
  const int64_t s_lo = std::min(c.src_offset, s_last), s_hi = std::max(c.src_offset, s_last) + c.rows;
  const int64_t d_lo = std::min(c.dst_offset, d_last), d_hi = std::max(c.dst_offset, d_last) + c.rows;
  LB_CHECK(!overlap(reinterpret_cast<uintptr_t>(src.data()) + static_cast<uintptr_t>(s_lo) * row_bytes,
                    static_cast<uintptr_t>(s_hi - s_lo) * row_bytes,
                    reinterpret_cast<uintptr_t>(dst.data()) + static_cast<uintptr_t>(d_lo) * row_bytes,
                    static_cast<uintptr_t>(d_hi - d_lo) * row_bytes),
           "{}: src rows [{}, {}) of {} and dst rows [{}, {}) of {} overlap in memory", op, s_lo, s_hi,
           src.describe(), d_lo, d_hi, dst.describe());
}

ConcatDims check_concat_cols(const Target& t, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* op = "concat_cols";
  activation(t, op, "a", a);
  like(t, op, "b", b, "a", a);
  like(t, op, "out", out, "a", a);
  const int64_t ca = last_dim(op, "a", a), cb = last_dim(op, "b", b);
  const int64_t n = rows_of(op, "a", a, ca);
  LB_CHECK(rows_of(op, "b", b, cb) == n, "{}: a {} and b {} differ in rows", op, a.describe(), b.describe());
  LB_CHECK(out.numel() == n * (ca + cb) && last_dim(op, "out", out) == ca + cb,
           "{}: out {} is not [{}, {} + {}]", op, out.describe(), n, ca, cb);
  apart(op, "out", out, "a", a);
  apart(op, "out", out, "b", b);
  return {n, ca, cb};
}

void check_add_broadcast(const Target& t, const Tensor& x, const Tensor& y) {
  const char* op = "add_broadcast";
  activation(t, op, "x", x);
  on_device(t, op, "y", y);
  LB_CHECK(y.dtype() == x.dtype() || y.dtype() == DType::F32, "{}: y {} is neither {} like x {} nor float32", op,
           y.describe(), dtype_name(x.dtype()), x.describe());
  LB_CHECK(y.numel() > 0 && x.numel() % y.numel() == 0, "{}: y {} does not repeat over x {}", op, y.describe(),
           x.describe());
  apart(op, "x", x, "y", y);
}

void check_add(const Target& t, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* op = "add";
  activation(t, op, "a", a);
  like(t, op, "b", b, "a", a);
  like(t, op, "out", out, "a", a);
  LB_CHECK(b.numel() == a.numel() && out.numel() == a.numel(), "{}: a {}, b {} and out {} differ in size", op,
           a.describe(), b.describe(), out.describe());
  same_or_apart(op, "out", out, "a", a);
  same_or_apart(op, "out", out, "b", b);
}

void check_unary(const Target& t, const char* op, const Tensor& x, const Tensor& out) {
  activation(t, op, "x", x);
  like(t, op, "out", out, "x", x);
  LB_CHECK(out.numel() == x.numel(), "{}: out {} is not the size of x {}", op, out.describe(), x.describe());
  same_or_apart(op, "out", out, "x", x);
}

MatrixDims check_adaln_modulate(const Target& t, const Tensor& xn, const Tensor& mod, const Tensor& residual,
                                const Tensor& out) {
  const char* op = "adaln_modulate";
  activation(t, op, "xn", xn);
  like(t, op, "mod", mod, "xn", xn);
  like(t, op, "residual", residual, "xn", xn);
  like(t, op, "out", out, "xn", xn);
  const int64_t c = last_dim(op, "xn", xn);
  const int64_t n = rows_of(op, "xn", xn, c);
  holds(op, "mod", mod, n, 3 * c);
  holds(op, "residual", residual, n, c);
  holds(op, "out", out, n, c);
  apart(op, "out", out, "xn", xn);
  apart(op, "out", out, "mod", mod);
  apart(op, "out", out, "residual", residual);
  return {n, c};
}

// ---- images and feature maps ------------------------------------------------------

Nchw check_patchify(const Target& t, const Tensor& images, int patch, const Tensor& patches) {
  const char* op = "patchify";
  const Nchw s = nchw(t, op, "images", images);
  LB_CHECK(s.c == 3, "{}: images {} are not RGB [B, 3, H, W]", op, images.describe());
  LB_CHECK(patch > 0 && s.h % patch == 0 && s.w % patch == 0, "{}: images {} are not whole {}x{} patches", op,
           images.describe(), patch, patch);
  activation(t, op, "patches", patches);
  holds(op, "patches", patches, s.n * (s.h / patch) * (s.w / patch), 3 * int64_t{patch} * patch);
  apart(op, "patches", patches, "images", images);
  return s;
}

TokenMaps check_tokens_to_nchw(const Target& t, const Tensor& tokens, int h, int w, const Tensor& maps) {
  const char* op = "tokens_to_nchw";
  activation(t, op, "tokens", tokens);
  like(t, op, "maps", maps, "tokens", tokens);
  const int64_t c = last_dim(op, "tokens", tokens);
  const int64_t plane = int64_t{h} * w;
  LB_CHECK(h > 0 && w > 0 && c > 0 && tokens.numel() % (plane * c) == 0, "{}: tokens {} are not [B, {}x{}, C]", op,
           tokens.describe(), h, w);
  const int64_t batches = tokens.numel() / (plane * c);
  LB_CHECK(maps.shape() == Shape({batches, c, h, w}), "{}: maps {} are not [{}, {}, {}, {}]", op, maps.describe(),
           batches, c, h, w);
  apart(op, "maps", maps, "tokens", tokens);
  return {batches, plane, c};
}

ConvDims check_conv2d(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad,
                      const Tensor& out) {
  const char* op = "conv2d";
  const Nchw in = nchw(t, op, "x", x);
  const Nchw o = nchw(t, op, "out", out);
  float32(t, op, "weight", w);
  LB_CHECK(w.ndim() == 4 && w.dim(0) == o.c && w.dim(1) == in.c && w.dim(2) == w.dim(3) && w.dim(2) > 0,
           "{}: weight {} is not [{}, {}, k, k] for x {} and out {}", op, w.describe(), o.c, in.c, x.describe(),
           out.describe());
  LB_CHECK(stride > 0 && pad >= 0, "{}: stride {} and padding {}", op, stride, pad);
  const int64_t k = w.dim(2);
  LB_CHECK(k <= in.h + 2 * int64_t{pad} && k <= in.w + 2 * int64_t{pad},
           "{}: kernel {} is larger than x {} with padding {}", op, k, x.describe(), pad);
  const int64_t oh = (in.h + 2 * int64_t{pad} - k) / stride + 1, ow = (in.w + 2 * int64_t{pad} - k) / stride + 1;
  LB_CHECK(o.n == in.n && o.h == oh && o.w == ow, "{}: out {} is not [{}, {}, {}, {}] (x {}, k {}, stride {}, pad {})",
           op, out.describe(), in.n, o.c, oh, ow, x.describe(), k, stride, pad);
  vector(t, op, "bias", b, o.c);
  apart(op, "out", out, "x", x);
  apart(op, "out", out, "weight", w);
  apart(op, "out", out, "bias", b);
  return {in, o, k};
}

ConvDims check_conv_transpose2d(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, int k,
                                const Tensor& out) {
  const char* op = "conv_transpose2d";
  const Nchw in = nchw(t, op, "x", x);
  const Nchw o = nchw(t, op, "out", out);
  float32(t, op, "weight", w);
  LB_CHECK(k > 0, "{}: kernel {}", op, k);
  LB_CHECK(w.ndim() == 4 && w.dim(0) == in.c && w.dim(1) == o.c && w.dim(2) == k && w.dim(3) == k,
           "{}: weight {} is not [{}, {}, {}, {}] for x {} and out {}", op, w.describe(), in.c, o.c, k, k,
           x.describe(), out.describe());
  LB_CHECK(o.n == in.n && o.h == in.h * k && o.w == in.w * k, "{}: out {} is not [{}, {}, {}, {}] (x {}, k {})", op,
           out.describe(), in.n, o.c, in.h * k, in.w * k, x.describe(), k);
  vector(t, op, "bias", b, o.c);
  apart(op, "out", out, "x", x);
  apart(op, "out", out, "weight", w);
  apart(op, "out", out, "bias", b);
  return {in, o, k};
}

MapDims check_resize_bilinear(const Target& t, const Tensor& x, const Tensor* add, const Tensor& out) {
  const char* op = "resize_bilinear";
  const Nchw in = nchw(t, op, "x", x);
  const Nchw o = nchw(t, op, "out", out);
  LB_CHECK(in.n == o.n && in.c == o.c, "{}: x {} and out {} differ in batches or channels", op, x.describe(),
           out.describe());
  LB_CHECK(o.h * o.w == 0 || (in.h > 0 && in.w > 0), "{}: x {} has no pixels to resize to out {}", op, x.describe(),
           out.describe());
  if (add != nullptr) {
    float32(t, op, "add", *add);
    const int64_t plane = o.h * o.w;
    LB_CHECK(plane > 0 && add->numel() > 0 && add->numel() % plane == 0 && out.numel() % add->numel() == 0,
             "{}: add {} is not whole planes of out {} repeating over its leading dims", op, add->describe(),
             out.describe());
  }
  apart(op, "out", out, "x", x);
  apart(op, "out", out, "add", add);
  return {in, o};
}

}  // namespace lingbot::contracts
