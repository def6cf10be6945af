#include "backend/op_contracts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace lingbot::contracts {

namespace {

// ---- refusing: the failure path, out of line ------------------------------------
// A passing check is a few inlined comparisons; everything a message needs
// (describing tensors, formatting) happens in refuse(), which only a failing
// check calls.

// A tensor in a message, described when the message is made.
struct Described {
  const Tensor* t;
};

template <typename T>
const T& shown(const T& v) {
  return v;
}
std::string shown(Described d) { return d.t->describe(); }

template <typename... Args>
[[noreturn, gnu::cold, gnu::noinline]] void refuse(const char* format, const Args&... args) {
  auto values = std::make_tuple(shown(args)...);
  std::apply([format](auto&... v) { throw Error(fmt::vformat(format, fmt::make_format_args(v...))); }, values);
  __builtin_unreachable();
}

#define REQUIRE(cond, ...)                 \
  do {                                     \
    if (!(cond)) [[unlikely]]              \
      refuse(__VA_ARGS__);                 \
  } while (0)

// "float32", "float32 or bfloat16": the activation dtypes of a target.
std::string activation_dtypes(const Target& t) {
  std::string s(dtype_name(DType::F32));
  for (DType d : {t.compute, t.residual}) {
    const std::string name(dtype_name(d));
    if (s.find(name) == std::string::npos) s += " or " + name;
  }
  return s;
}

// ---- an op's tensor arguments ------------------------------------------------------

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (const int64_t d : s) n *= d;
  return n;
}

// A tensor argument: its name in messages and, worked out once, its element
// count and the bytes [begin, end) it spans.
struct Arg {
  Arg(const char* name, const Tensor& tensor)
      : what(name),
        t(tensor),
        n(elements(tensor.shape())),
        begin(reinterpret_cast<uintptr_t>(tensor.data())),
        end(begin + static_cast<uintptr_t>(n) * dtype_size(tensor.dtype())) {}

  const char* what;
  const Tensor& t;
  int64_t n;
  uintptr_t begin, end;

  DType dtype() const { return t.dtype(); }
  const Shape& shape() const { return t.shape(); }
  Described d() const { return {&t}; }
};

// An optional argument (a bias, a gain, the added tensor of a resize).
using OptArg = std::optional<Arg>;
OptArg optional(const char* name, const Tensor* t) {
  return t != nullptr ? OptArg(std::in_place, name, *t) : std::nullopt;
}

// Allocated, on the target's device.
void on_device(const Target& t, const char* op, const Arg& a) {
  REQUIRE(a.t.defined(), "{}: {} is not allocated", op, a.what);
  REQUIRE(a.t.device() == t.device, "{}: {} {} is not on {}", op, a.what, a.d(), device_name(t.device));
}

// Allocated, in host memory.
void on_host(const char* op, const Arg& a) {
  REQUIRE(a.t.defined(), "{}: {} is not allocated", op, a.what);
  REQUIRE(a.t.is_cpu(), "{}: {} {} is not a host tensor", op, a.what, a.d());
}

void activation(const Target& t, const char* op, const Arg& a) {
  on_device(t, op, a);
  REQUIRE(t.activation(a.dtype()), "{}: {} {} is not {}", op, a.what, a.d(), activation_dtypes(t));
}

void float32(const Target& t, const char* op, const Arg& a) {
  on_device(t, op, a);
  REQUIRE(a.dtype() == DType::F32, "{}: {} {} is not float32", op, a.what, a.d());
}

void floating(const Target& t, const char* op, const Arg& a) {
  on_device(t, op, a);
  REQUIRE(is_floating(a.dtype()), "{}: {} {} is not a float tensor", op, a.what, a.d());
}

// On the device, of the dtype of `ref`.
void like(const Target& t, const char* op, const Arg& a, const Arg& ref) {
  on_device(t, op, a);
  REQUIRE(a.dtype() == ref.dtype(), "{}: {} {} is not {} like {} {}", op, a.what, a.d(), dtype_name(ref.dtype()),
          ref.what, ref.d());
}

int64_t last_dim(const char* op, const Arg& a) {
  REQUIRE(!a.shape().empty(), "{}: {} {} is a scalar", op, a.what, a.d());
  return a.shape().back();
}

// The rows of `a` seen as a matrix of `cols` columns.
int64_t rows_of(const char* op, const Arg& a, int64_t cols) {
  REQUIRE(cols > 0 && a.n % cols == 0, "{}: {} {} is not rows of {}", op, a.what, a.d(), cols);
  return a.n / cols;
}

// `a` holds a [rows, cols] matrix.
void holds(const char* op, const Arg& a, int64_t rows, int64_t cols) {
  REQUIRE(a.n == rows * cols, "{}: {} {} is not [{}, {}]", op, a.what, a.d(), rows, cols);
}

// An optional float32 vector of n elements.
void vector(const Target& t, const char* op, const OptArg& v, int64_t n) {
  if (!v) return;
  float32(t, op, *v);
  REQUIRE(v->n == n, "{}: {} {} is not [{}]", op, v->what, v->d(), n);
}

Nchw nchw(const Target& t, const char* op, const Arg& a) {
  float32(t, op, a);
  REQUIRE(a.shape().size() == 4, "{}: {} {} is not NCHW", op, a.what, a.d());
  const Shape& s = a.shape();
  return {s[0], s[1], s[2], s[3]};
}

// A feature map in `layout`: its dims as (n, c, h, w) either way. Channels
// first maps are float32; channels last ones float32, or bfloat16 on a
// backend that computes in it (the depth head's option depth_head_dtype),
// every map of one op in one dtype.
Nchw map_dims(const Target& t, const char* op, const Arg& a, MapLayout layout) {
  if (layout == MapLayout::ChannelsFirst) return nchw(t, op, a);
  activation(t, op, a);
  REQUIRE(a.dtype() == DType::F32 || a.dtype() == DType::BF16, "{}: {} {} is neither float32 nor bfloat16", op,
          a.what, a.d());
  REQUIRE(a.shape().size() == 4, "{}: {} {} is not NHWC", op, a.what, a.d());
  const Shape& s = a.shape();
  return {s[0], s[3], s[1], s[2]};
}

// "[n, c, h, w]" or "[n, h, w, c]": a map's expected shape in messages.
std::string map_shape(MapLayout layout, int64_t n, int64_t c, int64_t h, int64_t w) {
  return layout == MapLayout::ChannelsFirst ? fmt::format("[{}, {}, {}, {}]", n, c, h, w)
                                            : fmt::format("[{}, {}, {}, {}]", n, h, w, c);
}

const char* with_layout(const char* op, MapLayout layout) {
  if (layout == MapLayout::ChannelsFirst) return op;
  if (std::string_view(op) == "conv2d") return "conv2d_nhwc";
  if (std::string_view(op) == "conv_transpose2d") return "conv_transpose2d_nhwc";
  if (std::string_view(op) == "resize_bilinear") return "resize_bilinear_nhwc";
  return "resize_bilinear_add_axes_nhwc";
}

// Whether the byte ranges [a0, a1) and [b0, b1) share a byte.
bool overlap(uintptr_t a0, uintptr_t a1, uintptr_t b0, uintptr_t b1) {
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

bool overlap(const Arg& a, const Arg& b) { return overlap(a.begin, a.end, b.begin, b.end); }

// An output apart from an input.
void apart(const char* op, const Arg& out, const Arg& in) {
  REQUIRE(!overlap(out, in), "{}: {} {} overlaps {} {}", op, out.what, out.d(), in.what, in.d());
}

void apart(const char* op, const Arg& out, const OptArg& in) {
  if (in) apart(op, out, *in);
}

// An output that may alias an input: that very tensor, or apart from it.
void same_or_apart(const char* op, const Arg& out, const Arg& in) {
  REQUIRE(!overlap(out, in) || (out.begin == in.begin && out.end == in.end),
          "{}: {} {} overlaps part of {} {} (it may be that tensor, not part of it)", op, out.what, out.d(), in.what,
          in.d());
}

}  // namespace

// ---- memory -----------------------------------------------------------------

void check_upload(const Target&, const Tensor& host) { on_host("upload", Arg("host", host)); }

void check_upload_into(const Target& t, const Tensor& host, const Tensor& device) {
  const char* op = "upload_into";
  const Arg h("host", host), d("device", device);
  on_host(op, h);
  on_device(t, op, d);
  REQUIRE(h.shape() == d.shape(), "{}: host {} and device {} differ in shape", op, h.d(), d.d());
}

void check_download(const Target& t, const Tensor& device) { on_device(t, "download", Arg("device", device)); }

void check_download_async(const Target& t, const Tensor& device, const Tensor& host) {
  const char* op = "download_async";
  const Arg d("device", device), h("host", host);
  on_device(t, op, d);
  on_host(op, h);
  REQUIRE(h.shape() == d.shape() && h.dtype() == d.dtype(), "{}: host {} differs in shape or dtype from device {}", op,
          h.d(), d.d());
}

void check_fill(const Target& t, const Tensor& x) { floating(t, "fill", Arg("tensor", x)); }

void check_convert(const Target& t, const Tensor& src, const Tensor& dst) {
  const char* op = "convert";
  const Arg s("src", src), d("dst", dst);
  floating(t, op, s);
  floating(t, op, d);
  REQUIRE(s.n == d.n, "{}: src {} and dst {} differ in element count", op, s.d(), d.d());
}

// ---- dense layers -------------------------------------------------------------

namespace {

// x[N, K] w[M, K]^T with an optional bias[M]: what linear and linear_residual share.
LinearDims check_product(const Target& t, const char* op, const Arg& x, const Arg& w, const OptArg& b) {
  activation(t, op, x);
  // The weight is x's dtype, or bfloat16 under a float32 x: a matrix kept in
  // bfloat16 to halve its memory, multiplied in float32 (the camera head's
  // option camera_head_weights bf16).
  if (!(x.dtype() == DType::F32 && w.dtype() == DType::BF16)) like(t, op, w, x);
  on_device(t, op, w);
  REQUIRE(w.shape().size() == 2, "{}: weight {} is not a matrix [M, K]", op, w.d());
  const int64_t m = w.shape()[0], k = w.shape()[1];
  REQUIRE(k > 0 && x.n % k == 0, "{}: x {} is not rows of weight {}'s K = {}", op, x.d(), w.d(), k);
  vector(t, op, b, m);
  return {x.n / k, k, m};
}

}  // namespace

LinearDims check_linear(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& out) {
  const char* op = "linear";
  const Arg ax("x", x), aw("weight", w), ao("out", out);
  const OptArg ab = optional("bias", b);
  const LinearDims d = check_product(t, op, ax, aw, ab);
  activation(t, op, ao);
  holds(op, ao, d.n, d.m);
  apart(op, ao, ax);
  apart(op, ao, aw);
  apart(op, ao, ab);
  return d;
}

LinearDims check_linear_residual(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b,
                                 const Tensor* gamma, const Tensor& residual) {
  const char* op = "linear_residual";
  const Arg ax("x", x), aw("weight", w), ar("residual", residual);
  const OptArg ab = optional("bias", b), ag = optional("gamma", gamma);
  const LinearDims d = check_product(t, op, ax, aw, ab);
  vector(t, op, ag, d.m);
  activation(t, op, ar);
  holds(op, ar, d.n, d.m);
  apart(op, ar, ax);
  apart(op, ar, aw);
  apart(op, ar, ab);
  apart(op, ar, ag);
  return d;
}

MatrixDims check_layer_norm(const Target& t, const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& out) {
  const char* op = "layer_norm";
  const Arg ax("x", x), ao("out", out);
  const OptArg aw = optional("weight", w), ab = optional("bias", b);
  activation(t, op, ax);
  activation(t, op, ao);
  // C is the weight's length, or x's last dimension without a weight.
  const int64_t c = aw ? aw->n : last_dim(op, ax);
  vector(t, op, aw, c);
  if (aw) {
    REQUIRE(c > 0 && ax.n % c == 0, "{}: x {} is not rows of weight {}'s {}", op, ax.d(), aw->d(), c);
  } else {
    rows_of(op, ax, c);
  }
  vector(t, op, ab, c);
  REQUIRE(ao.n == ax.n, "{}: out {} is not the size of x {}", op, ao.d(), ax.d());
  // In place only with one dtype: the same bytes.
  same_or_apart(op, ao, ax);
  apart(op, ao, aw);
  apart(op, ao, ab);
  return {ax.n / c, c};
}

// ---- attention ----------------------------------------------------------------

MatrixDims check_split_qkv(const Target& t, const Tensor& qkv, int num_heads, int head_dim, const QkNorm* norm,
                           const RopeTable* rope, const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* op = "split_qkv";
  const Arg in("qkv", qkv), aq("q", q), ak("k", k), av("v", v);
  activation(t, op, in);
  like(t, op, aq, in);
  like(t, op, ak, in);
  like(t, op, av, in);
  REQUIRE(num_heads > 0 && head_dim > 0, "{}: {} heads of dimension {}", op, num_heads, head_dim);
  const int64_t c = int64_t{num_heads} * head_dim;
  REQUIRE(in.n % (3 * c) == 0, "{}: qkv {} is not rows of 3 x {} heads x {}", op, in.d(), num_heads, head_dim);
  const int64_t n = in.n / (3 * c);
  holds(op, aq, n, c);
  holds(op, ak, n, c);
  holds(op, av, n, c);
  if (norm != nullptr) {
    vector(t, op, optional("q_norm weight", norm->q_weight), head_dim);
    vector(t, op, optional("q_norm bias", norm->q_bias), head_dim);
    vector(t, op, optional("k_norm weight", norm->k_weight), head_dim);
    vector(t, op, optional("k_norm bias", norm->k_bias), head_dim);
  }
  if (rope != nullptr) {
    const Arg cos("rope cos", rope->cos), sin("rope sin", rope->sin);
    float32(t, op, cos);
    float32(t, op, sin);
    REQUIRE(cos.shape().size() == 2 && cos.shape()[0] > 0 && cos.shape()[1] == head_dim / 2 &&
                sin.shape() == cos.shape(),
            "{}: rope table cos {} / sin {} is not [rows, {}] for head_dim {}", op, cos.d(), sin.d(), head_dim / 2,
            head_dim);
    const bool half_split = rope->pairs == RopeTable::Pairs::HalfSplit;
    REQUIRE(head_dim % (half_split ? 4 : 2) == 0, "{}: {} RoPE needs head_dim divisible by {}, got {}", op,
            half_split ? "half-split" : "interleaved", half_split ? 4 : 2, head_dim);
  }
  // Outputs apart from the input and from each other.
  apart(op, aq, in);
  apart(op, ak, in);
  apart(op, av, in);
  apart(op, aq, ak);
  apart(op, aq, av);
  apart(op, ak, av);
  return {n, c};
}

MatrixDims check_attention(const Target& t, const Tensor& q, const Tensor& k, const Tensor& v, int groups,
                           int num_heads, int head_dim, const Tensor& out) {
  const char* op = "attention";
  const Arg aq("q", q), ak("k", k), av("v", v), ao("out", out);
  activation(t, op, aq);
  like(t, op, ak, aq);
  like(t, op, av, aq);
  like(t, op, ao, aq);
  REQUIRE(groups > 0 && num_heads > 0 && head_dim > 0, "{}: {} groups of {} heads of dimension {}", op, groups,
          num_heads, head_dim);
  const int64_t c = int64_t{num_heads} * head_dim;
  REQUIRE(aq.n % (c * groups) == 0, "{}: q {} is not {} equal groups of rows of {} heads x {}", op, aq.d(), groups,
          num_heads, head_dim);
  REQUIRE(ak.n == aq.n && av.n == aq.n && ao.n == aq.n, "{}: q {}, k {}, v {} and out {} differ in size", op, aq.d(),
          ak.d(), av.d(), ao.d());
  apart(op, ao, aq);
  apart(op, ao, ak);
  apart(op, ao, av);
  return {aq.n / (c * groups), c};
}

// ---- element-wise and data movement ---------------------------------------------

namespace {

// The row where block `b` starts: offset + b * stride, without overflow.
int64_t block_start(const char* side, int64_t offset, int64_t stride, int64_t b) {
  int64_t step = 0, start = 0;
  REQUIRE(!__builtin_mul_overflow(stride, b, &step) && !__builtin_add_overflow(offset, step, &start),
          "copy_rows: {}_offset {} + {} x {}_batch_stride {} overflows", side, offset, b, side, stride);
  return start;
}

// "block 2 of 3: " where a copy has several blocks.
std::string block_name(int64_t b, int64_t batches) {
  return batches == 1 ? std::string() : fmt::format("block {} of {}: ", b, batches);
}

// Block b's rows [start, start + rows) inside `a`'s `total` rows.
void block_in_range(const Arg& a, int64_t total, int64_t b, int64_t batches, int64_t start, int64_t rows) {
  if (start >= 0 && start <= total - rows) [[likely]]
    return;
  const int64_t end = start > std::numeric_limits<int64_t>::max() - rows ? std::numeric_limits<int64_t>::max()
                                                                          : start + rows;
  REQUIRE(start >= 0, "copy_rows: {}{} rows [{}, {}) before {}'s first row ({} {})", block_name(b, batches), a.what,
          start, end, a.what, a.what, a.d());
  refuse("copy_rows: {}{} rows [{}, {}) past {}'s {} rows ({} {})", block_name(b, batches), a.what, start, end,
         a.what, total, a.what, a.d());
}

}  // namespace

void check_copy_rows(const Target& t, const Tensor& src, const Tensor& dst, const RowCopy& c) {
  const char* op = "copy_rows";
  const Arg s("src", src), d("dst", dst);
  on_device(t, op, s);
  on_device(t, op, d);
  REQUIRE(s.dtype() == d.dtype(), "{}: src {} and dst {} differ in dtype", op, s.d(), d.d());
  if (c.batches < 0 || c.rows < 0 || c.src_offset < 0 || c.dst_offset < 0) [[unlikely]] {
    const auto [name, value] = c.batches < 0      ? std::pair{"batches", c.batches}
                               : c.rows < 0       ? std::pair{"rows", c.rows}
                               : c.src_offset < 0 ? std::pair{"src_offset", c.src_offset}
                                                  : std::pair{"dst_offset", c.dst_offset};
    refuse("{}: negative {} {} (src {}, dst {})", op, name, value, s.d(), d.d());
  }
  const int64_t src_rows = rows_of(op, s, c.cols), dst_rows = rows_of(op, d, c.cols);
  if (c.batches == 0 || c.rows == 0) return;
  // A block's first row is linear in b: the first and the last block bound them all.
  const int64_t last = c.batches - 1;
  const int64_t s_last = block_start("src", c.src_offset, c.src_batch_stride, last);
  const int64_t d_last = block_start("dst", c.dst_offset, c.dst_batch_stride, last);
  block_in_range(s, src_rows, 0, c.batches, c.src_offset, c.rows);
  block_in_range(s, src_rows, last, c.batches, s_last, c.rows);
  block_in_range(d, dst_rows, 0, c.batches, c.dst_offset, c.rows);
  block_in_range(d, dst_rows, last, c.batches, d_last, c.rows);
  // The blocks are one write each: they must not overlap in dst (a zero dst
  // stride only for one block). In range, |stride| < dst's rows: no overflow.
  REQUIRE(c.batches == 1 || c.dst_batch_stride >= c.rows || -c.dst_batch_stride >= c.rows,
          "{}: {} dst blocks of {} rows, {} rows apart, overlap (dst {})", op, c.batches, c.rows, c.dst_batch_stride,
          d.d());
  // The rows read and the rows written must not share memory.
  const auto row_bytes = static_cast<uintptr_t>(c.cols) * dtype_size(s.dtype());
  const int64_t s_lo = std::min(c.src_offset, s_last), s_hi = std::max(c.src_offset, s_last) + c.rows;
  const int64_t d_lo = std::min(c.dst_offset, d_last), d_hi = std::max(c.dst_offset, d_last) + c.rows;
  REQUIRE(!overlap(s.begin + static_cast<uintptr_t>(s_lo) * row_bytes, s.begin + static_cast<uintptr_t>(s_hi) * row_bytes,
                   d.begin + static_cast<uintptr_t>(d_lo) * row_bytes, d.begin + static_cast<uintptr_t>(d_hi) * row_bytes),
          "{}: src rows [{}, {}) of {} and dst rows [{}, {}) of {} overlap in memory", op, s_lo, s_hi, s.d(), d_lo,
          d_hi, d.d());
}

ConcatDims check_concat_cols(const Target& t, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* op = "concat_cols";
  const Arg aa("a", a), ab("b", b), ao("out", out);
  activation(t, op, aa);
  like(t, op, ab, aa);
  like(t, op, ao, aa);
  const int64_t ca = last_dim(op, aa), cb = last_dim(op, ab);
  const int64_t n = rows_of(op, aa, ca);
  REQUIRE(rows_of(op, ab, cb) == n, "{}: a {} and b {} differ in rows", op, aa.d(), ab.d());
  REQUIRE(ao.n == n * (ca + cb), "{}: out {} is not [{}, {} + {}]", op, ao.d(), n, ca, cb);
  apart(op, ao, aa);
  apart(op, ao, ab);
  return {n, ca, cb};
}

void check_add_broadcast(const Target& t, const Tensor& x, const Tensor& y) {
  const char* op = "add_broadcast";
  const Arg ax("x", x), ay("y", y);
  activation(t, op, ax);
  on_device(t, op, ay);
  REQUIRE(ay.dtype() == ax.dtype() || ay.dtype() == DType::F32, "{}: y {} is neither {} like x {} nor float32", op,
          ay.d(), dtype_name(ax.dtype()), ax.d());
  REQUIRE(ay.n > 0 && ax.n % ay.n == 0, "{}: y {} does not repeat over x {}", op, ay.d(), ax.d());
  apart(op, ax, ay);
}

void check_add(const Target& t, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* op = "add";
  const Arg aa("a", a), ab("b", b), ao("out", out);
  activation(t, op, aa);
  like(t, op, ab, aa);
  like(t, op, ao, aa);
  REQUIRE(ab.n == aa.n && ao.n == aa.n, "{}: a {}, b {} and out {} differ in size", op, aa.d(), ab.d(), ao.d());
  same_or_apart(op, ao, aa);
  same_or_apart(op, ao, ab);
}

void check_unary(const Target& t, const char* op, const Tensor& x, const Tensor& out) {
  const Arg ax("x", x), ao("out", out);
  activation(t, op, ax);
  like(t, op, ao, ax);
  REQUIRE(ao.n == ax.n, "{}: out {} is not the size of x {}", op, ao.d(), ax.d());
  same_or_apart(op, ao, ax);
}

MatrixDims check_adaln_modulate(const Target& t, const Tensor& xn, const Tensor& mod, const Tensor& residual,
                                const Tensor& out) {
  const char* op = "adaln_modulate";
  const Arg ax("xn", xn), am("mod", mod), ar("residual", residual), ao("out", out);
  activation(t, op, ax);
  like(t, op, am, ax);
  like(t, op, ar, ax);
  like(t, op, ao, ax);
  const int64_t c = last_dim(op, ax);
  const int64_t n = rows_of(op, ax, c);
  holds(op, am, n, 3 * c);
  holds(op, ar, n, c);
  holds(op, ao, n, c);
  apart(op, ao, ax);
  apart(op, ao, am);
  apart(op, ao, ar);
  return {n, c};
}

// ---- images and feature maps ------------------------------------------------------

Nchw check_patchify(const Target& t, const Tensor& images, int patch, const Tensor& patches) {
  const char* op = "patchify";
  const Arg ai("images", images), ap("patches", patches);
  const Nchw s = nchw(t, op, ai);
  REQUIRE(s.c == 3, "{}: images {} are not RGB [B, 3, H, W]", op, ai.d());
  REQUIRE(patch > 0, "{}: patch size {}", op, patch);
  REQUIRE(s.h % patch == 0 && s.w % patch == 0, "{}: images {} are not whole {}x{} patches", op, ai.d(), patch,
          patch);
  activation(t, op, ap);
  holds(op, ap, s.n * (s.h / patch) * (s.w / patch), 3 * int64_t{patch} * patch);
  apart(op, ap, ai);
  return s;
}

TokenMaps check_tokens_to_nchw(const Target& t, const Tensor& tokens, int h, int w, const Tensor& maps) {
  const char* op = "tokens_to_nchw";
  const Arg at("tokens", tokens), am("maps", maps);
  activation(t, op, at);
  like(t, op, am, at);
  const int64_t c = last_dim(op, at);
  const int64_t plane = int64_t{h} * w;
  REQUIRE(h > 0 && w > 0 && c > 0 && at.n % (plane * c) == 0, "{}: tokens {} are not [B, {}x{}, C]", op, at.d(), h,
          w);
  const int64_t batches = at.n / (plane * c);
  const Shape& m = am.shape();
  REQUIRE(m.size() == 4 && m[0] == batches && m[1] == c && m[2] == h && m[3] == w,
          "{}: maps {} are not [{}, {}, {}, {}]", op, am.d(), batches, c, h, w);
  apart(op, am, at);
  return {batches, plane, c};
}

ConvDims check_conv2d(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, int stride, int pad,
                      const Tensor& out, MapLayout layout, const ConvEpilogue& epilogue) {
  const char* op = with_layout("conv2d", layout);
  const Arg ax("x", x), aw("weight", w), ao("out", out);
  const OptArg ab = optional("bias", b), ar = optional("residual", epilogue.residual);
  REQUIRE(epilogue.act == Activation::None || epilogue.act == Activation::Relu,
          "{}: only a ReLU epilogue is implemented", op);
  const Nchw in = map_dims(t, op, ax, layout);
  const Nchw o = map_dims(t, op, ao, layout);
  like(t, op, ao, ax);
  like(t, op, aw, ax);  // the bias stays float32
  const Shape& ws = aw.shape();
  // Channels first: [Cout, Cin, k, k]; channels last: [Cout, k, k, Cin].
  const bool first = layout == MapLayout::ChannelsFirst;
  const auto dim = [&ws](size_t i) { return ws.size() == 4 ? ws[i] : int64_t{-1}; };
  const int64_t w_cin = dim(first ? 1 : 3), kh = dim(first ? 2 : 1), kw = dim(first ? 3 : 2);
  REQUIRE(ws.size() == 4 && ws[0] == o.c && w_cin == in.c && kh == kw && kh > 0,
          "{}: weight {} is not {} for x {} and out {}", op, aw.d(),
          first ? fmt::format("[{}, {}, k, k]", o.c, in.c) : fmt::format("[{}, k, k, {}]", o.c, in.c), ax.d(), ao.d());
  REQUIRE(stride > 0 && pad >= 0, "{}: stride {} and padding {}", op, stride, pad);
  const int64_t k = kh, p = pad;
  REQUIRE(k <= in.h + 2 * p && k <= in.w + 2 * p, "{}: kernel {} is larger than x {} with padding {}", op, k, ax.d(),
          pad);
  const int64_t oh = (in.h + 2 * p - k) / stride + 1, ow = (in.w + 2 * p - k) / stride + 1;
  REQUIRE(o.n == in.n && o.h == oh && o.w == ow, "{}: out {} is not {} (x {}, k {}, stride {}, pad {})", op, ao.d(),
          map_shape(layout, in.n, o.c, oh, ow), ax.d(), k, stride, pad);
  vector(t, op, ab, o.c);
  if (ar) {
    like(t, op, *ar, ax);
    REQUIRE(ar->shape() == ao.shape(), "{}: residual {} is not shaped like out {}", op, ar->d(), ao.d());
  }
  apart(op, ao, ax);
  apart(op, ao, aw);
  apart(op, ao, ab);
  apart(op, ao, ar);
  return {in, o, k};
}

ConvDims check_conv_transpose2d(const Target& t, const Tensor& x, const Tensor& w, const Tensor* b, int k,
                                const Tensor& out, MapLayout layout) {
  const char* op = with_layout("conv_transpose2d", layout);
  const Arg ax("x", x), aw("weight", w), ao("out", out);
  const OptArg ab = optional("bias", b);
  const Nchw in = map_dims(t, op, ax, layout);
  const Nchw o = map_dims(t, op, ao, layout);
  like(t, op, ao, ax);
  like(t, op, aw, ax);  // the bias stays float32
  REQUIRE(k > 0, "{}: kernel {}", op, k);
  const Shape& ws = aw.shape();
  REQUIRE(ws.size() == 4 && ws[0] == in.c && ws[1] == o.c && ws[2] == k && ws[3] == k,
          "{}: weight {} is not [{}, {}, {}, {}] for x {} and out {}", op, aw.d(), in.c, o.c, k, k, ax.d(), ao.d());
  REQUIRE(o.n == in.n && o.h == in.h * k && o.w == in.w * k, "{}: out {} is not {} (x {}, k {})", op, ao.d(),
          map_shape(layout, in.n, o.c, in.h * k, in.w * k), ax.d(), k);
  vector(t, op, ab, o.c);
  apart(op, ao, ax);
  apart(op, ao, aw);
  apart(op, ao, ab);
  return {in, o, k};
}

MapDims check_resize_bilinear(const Target& t, const Tensor& x, const Tensor* add, const Tensor& out,
                              MapLayout layout) {
  const char* op = with_layout("resize_bilinear", layout);
  const Arg ax("x", x), ao("out", out);
  const OptArg aa = optional("add", add);
  const Nchw in = map_dims(t, op, ax, layout);
  const Nchw o = map_dims(t, op, ao, layout);
  like(t, op, ao, ax);
  REQUIRE(in.n == o.n && in.c == o.c, "{}: x {} and out {} differ in batches or channels", op, ax.d(), ao.d());
  REQUIRE(o.h * o.w == 0 || (in.h > 0 && in.w > 0), "{}: x {} has no pixels to resize to out {}", op, ax.d(), ao.d());
  if (aa) {
    like(t, op, *aa, ax);
    // Whole planes [.., H, W] channels first; whole maps [.., H, W, C] channels last.
    const int64_t unit = layout == MapLayout::ChannelsFirst ? o.h * o.w : o.h * o.w * o.c;
    REQUIRE(unit > 0 && aa->n > 0 && aa->n % unit == 0 && ao.n % aa->n == 0,
            "{}: add {} is not whole {} of out {} repeating over its leading dims", op, aa->d(),
            layout == MapLayout::ChannelsFirst ? "planes" : "[H, W, C] maps", ao.d());
  }
  apart(op, ao, ax);
  apart(op, ao, aa);
  return {in, o};
}

MapDims check_resize_bilinear_add_axes(const Target& t, const Tensor& x, const Tensor& by_col, const Tensor& by_row,
                                       const Tensor& out, MapLayout layout) {
  const char* op = with_layout("resize_bilinear_add_axes", layout);
  const Arg ax("x", x), ao("out", out), ac("by_col", by_col), ar("by_row", by_row);
  const Nchw in = map_dims(t, op, ax, layout);
  const Nchw o = map_dims(t, op, ao, layout);
  like(t, op, ao, ax);
  REQUIRE(in.n == o.n && in.c == o.c, "{}: x {} and out {} differ in batches or channels", op, ax.d(), ao.d());
  REQUIRE(o.h * o.w == 0 || (in.h > 0 && in.w > 0), "{}: x {} has no pixels to resize to out {}", op, ax.d(), ao.d());
  float32(t, op, ac);  // the position terms stay float32
  float32(t, op, ar);
  REQUIRE(by_col.ndim() == 2 && by_col.dim(1) == o.w, "{}: by_col {} is not [channels, {}] (out's width)", op, ac.d(),
          o.w);
  REQUIRE(by_row.ndim() == 2 && by_row.dim(1) == o.h, "{}: by_row {} is not [channels, {}] (out's height)", op,
          ar.d(), o.h);
  REQUIRE(by_col.dim(0) + by_row.dim(0) == o.c, "{}: by_col {} and by_row {} do not cover out {}'s {} channels", op,
          ac.d(), ar.d(), ao.d(), o.c);
  apart(op, ao, ax);
  apart(op, ao, ac);
  apart(op, ao, ar);
  return {in, o};
}

}  // namespace lingbot::contracts
