// One table of op cases run against every backend, each case checked against
// the naive reference (naive_ops.h): the llama.cpp `test-backend-ops` habit.
//
// A case is an op, its shapes and options; it makes random inputs from a
// seed derived from its name, computes the reference on the host, runs the
// op on the backend (data through upload / download, outputs poisoned with
// NaN so that an unwritten element cannot pass) and compares. Each
// (backend, case) pair is its own test, e.g.
//   BackendOps/OpTable.MatchesNaive/Cpu1_linear_gelu_33x70x17
// so a failure names its op, shape and backend, and --gtest_filter picks one.
//
// Include this header from exactly one file per test binary, and instantiate
// the suite there with that binary's backends:
//   INSTANTIATE_TEST_SUITE_P(BackendOps, OpTable,
//                            Combine(ValuesIn(op_cases()), ValuesIn(backends)), op_param_name);
// tests/backend/backend_ops_test.cpp does it for the CPU backend,
// tests/backend/cuda/backend_ops_cuda_test.cpp for the CUDA backend.
//
// Precision. A case says which dtype its activations take (Storage):
// Compute is the backend's compute_dtype() (float32 on the CPU, bfloat16 on
// CUDA), F32 is float32 everywhere (the heads; on CUDA their products and
// convolutions run on TF32 tensor cores). Inputs are rounded to that dtype on
// the host before the reference sees them, so only the op's own arithmetic
// and output rounding are measured. Each case states two bounds on the
// per-tensor relative error ||got - ref|| / ||ref|| (test::relative_error):
// `f32` for a backend computing in float32 (compute_dtype() float32: the
// CPU), `lowp` for one with reduced-precision paths (the CUDA backend).
#pragma once

#include "naive_ops.h"
#include "test_support.h"

#include "backend/backend.h"
#include "core/tensor.h"
#include "kv/kv_cache.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace lingbot::test::ops {

// ---- bounds --------------------------------------------------------------------
// kExact       data movement and exact functions (copies, layouts, relu,
//              conversions): every element must be identical.
// kF32Round    a few float32 roundings per element against a double
//              reference (element-wise ops, norms, RoPE): observed ~1e-7;
//              one wrong term or index is an error of order 1e-1 .. 1.
// kF32Sum      float32 sums of up to ~600 products in another order (BLAS,
//              im2col, tiled online softmax): observed ~1e-7 .. 8e-7.
// kF32Resize   bilinear resizing with float32 source coordinates
//              (o * (in - 1) / (out - 1) rounded to float, off by up to
//              in * 2^-24 pixels, as PyTorch computes them): observed 7e-7.
// kBf16        bfloat16 activations: each rounding to 8 significant bits
//              is a relative error of RMS ~1.1e-3, and a result may be
//              rounded up to three times (a product, then bias and
//              activation; the softmax weights P in the mma attention
//              kernel); 1e-2 keeps that well inside while a missing term or
//              a wrong index still errs by far more.
// kTf32        float32 data through TF32 tensor cores (10 significant bits
//              per input, ~4e-4 RMS per product): 5e-3.
// kF32OnLowp   float32 element-wise work on the GPU (exp2, fused
//              multiply-adds, float coordinates): 1e-5.
constexpr double kExact = 0.0;
constexpr double kF32Round = 1e-6;
constexpr double kF32Sum = 1e-5;
constexpr double kF32Resize = 5e-6;
constexpr double kBf16 = 1e-2;
constexpr double kTf32 = 5e-3;
constexpr double kF32OnLowp = 1e-5;

struct Bound {
  double f32;   // backends computing in float32
  double lowp;  // backends with bfloat16 / TF32 paths
};

enum class Storage { Compute, F32 };

// FNV-1a: a seed from the case name, the same on every platform.
inline uint64_t seed_of(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// ||got - ref|| / ||ref|| (test::relative_error) within `bound`, every
// element finite on both sides, and with kExact every element equal. The
// message names the worst element and the first non-finite one.
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& ref, double bound, const std::string& what) {
  if (got.numel() != ref.numel())
    return ::testing::AssertionFailure() << what << ": " << got.numel() << " elements, reference " << ref.numel();
  int64_t nonfinite = 0, first_nonfinite = -1, worst = -1, differing = 0;
  double worst_diff = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.f32()[i], r = ref.f32()[i];
    if (!std::isfinite(g) || !std::isfinite(r)) {
      if (nonfinite++ == 0) first_nonfinite = i;
      continue;
    }
    const double d = std::fabs(static_cast<double>(g) - r);
    if (d != 0) ++differing;
    if (d > worst_diff) {
      worst_diff = d;
      worst = i;
    }
  }
  const double rel = nonfinite > 0 ? INFINITY : relative_error(got, ref);
  const bool ok = nonfinite == 0 && (bound == kExact ? differing == 0 : rel <= bound);
  auto result = ok ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
  result << what << ": relative error " << rel << " (bound " << bound << ")";
  if (worst >= 0)
    result << ", worst element " << worst << " got " << got.f32()[worst] << " want " << ref.f32()[worst] << ", "
           << differing << " of " << got.numel() << " differ";
  if (nonfinite > 0)
    result << "; " << nonfinite << " non-finite, first at " << first_nonfinite << " (got "
           << got.f32()[first_nonfinite] << ", want " << ref.f32()[first_nonfinite]
           << "): an element the op did not write?";
  return result;
}

// What a case's run() works with: the backend, the dtype its activations
// take there, its bound there, and a random generator seeded by the case.
class OpContext {
 public:
  OpContext(Backend& backend, DType act, double bound, uint64_t seed)
      : be(backend), act(act), bound(bound), rng_(seed) {}

  Backend& be;
  const DType act;
  const double bound;

  // Uniform host values in [lo, hi), as `as` stores them.
  Tensor random(const Shape& shape, float lo, float hi, DType as) {
    Tensor t = Tensor::empty(shape);
    std::uniform_real_distribution<float> uniform(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = naive::round_to(uniform(rng_), as);
    return t;
  }
  Tensor random(const Shape& shape, float lo = -1.0f, float hi = 1.0f) { return random(shape, lo, hi, act); }

  // A device copy of `host` as `dtype`. The host tensor is cloned first: the
  // CPU backend's upload shares memory with a host tensor of the same dtype,
  // and ops that write their inputs must not change the caller's copy.
  Tensor device(const Tensor& host, DType dtype) { return be.upload(host.clone(), dtype); }
  Tensor device(const Tensor& host) { return device(host, act); }

  // A device tensor of NaN.
  Tensor poisoned(const Shape& shape, DType dtype) {
    Tensor nan = Tensor::empty(shape);
    std::fill(nan.f32(), nan.f32() + nan.numel(), std::numeric_limits<float>::quiet_NaN());
    return be.upload(nan, dtype);
  }
  Tensor poisoned(const Shape& shape) { return poisoned(shape, act); }

  void expect(const Tensor& on_device, const Tensor& ref, const std::string& what, double bound_here) {
    EXPECT_TRUE(close(be.download(on_device), ref, bound_here, what));
  }
  void expect(const Tensor& on_device, const Tensor& ref, const std::string& what = "out") {
    expect(on_device, ref, what, bound);
  }

 private:
  std::mt19937_64 rng_;
};

struct OpCase {
  std::string name;  // the test name after the backend: letters, digits, '_'
  Storage storage = Storage::Compute;
  Bound bound;
  std::function<void(OpContext&)> run;
};

inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// ---- case builders, one per op ------------------------------------------------

namespace detail {

inline std::string suffix(Storage s) { return s == Storage::F32 ? "_f32" : ""; }

inline const char* act_name(Activation a) {
  switch (a) {
    case Activation::Gelu: return "_gelu";
    case Activation::Relu: return "_relu";
    case Activation::None: break;
  }
  return "";
}

inline std::string dims(const Shape& s) {
  return fmt::format("{}", fmt::join(s, "x"));
}

inline const char* dtype_label(DType t) {
  switch (t) {
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    default: return "f32";
  }
}

// The weight range that gives outputs of variance ~1 for `fan_in` inputs in
// [-1, 1], so that a bias is as large as the product and a lost one shows.
inline float weight_scale(int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); }


}  // namespace detail

inline OpCase linear_case(int64_t n, int64_t k, int64_t m, bool bias, Activation act,
                          Storage s = Storage::Compute) {
  OpCase c;
  c.name = fmt::format("linear{}_{}x{}x{}{}{}", detail::act_name(act), n, k, m, bias ? "" : "_nobias",
                       detail::suffix(s));
  c.storage = s;
  c.bound = {kF32Sum, s == Storage::Compute ? kBf16 : kTf32};
  c.run = [=](OpContext& ctx) {
    const float ws = detail::weight_scale(k);
    const Tensor x = ctx.random({n, k}), w = ctx.random({m, k}, -ws, ws), b = ctx.random({m}, -1, 1, DType::F32);
    const Tensor ref = naive::linear(x, w, bias ? &b : nullptr, act);
    const Tensor dx = ctx.device(x), dw = ctx.device(w), db = ctx.device(b, DType::F32);
    Tensor out = ctx.poisoned({n, m});
    ctx.be.linear(dx, dw, bias ? &db : nullptr, out, act);
    ctx.expect(out, ref);
  };
  return c;
}

// linear and linear_residual with the weight kept in bfloat16 under a
// float32 x (WeightStorage::camera_head_bf16): float32 sums on every backend,
// against the naive product of the bf16-rounded weights. `rows` above the
// products' pass of 8 rows check the row passes.
inline OpCase linear_bf16_weights_case(int64_t n, int64_t k, int64_t m, bool residual) {
  OpCase c;
  c.name = fmt::format("linear{}_bf16_weights_{}x{}x{}", residual ? "_residual" : "", n, k, m);
  c.storage = Storage::F32;
  c.bound = {kF32Sum, kF32Sum};
  c.run = [=](OpContext& ctx) {
    const float ws = detail::weight_scale(k);
    const Tensor x = ctx.random({n, k}, -1, 1, DType::F32), w = ctx.random({m, k}, -ws, ws, DType::BF16);
    const Tensor b = ctx.random({m}, -1, 1, DType::F32);
    const Tensor dx = ctx.device(x, DType::F32), dw = ctx.device(w, DType::BF16), db = ctx.device(b, DType::F32);
    if (residual) {
      const Tensor r = ctx.random({n, m}, -1, 1, DType::F32);
      Tensor dr = ctx.device(r, DType::F32);
      ctx.be.linear_residual(dx, dw, &db, nullptr, dr);
      ctx.expect(dr, naive::linear_residual(x, w, &b, nullptr, r), "residual");
    } else {
      Tensor out = ctx.poisoned({n, m}, DType::F32);
      ctx.be.linear(dx, dw, &db, out, Activation::Gelu);
      ctx.expect(out, naive::linear(x, w, &b, Activation::Gelu));
    }
  };
  return c;
}

struct LinearResidual {
  int64_t n, k, m;
  bool bias = true;
  bool gamma = true;
  bool f32_residual = false;  // the residual float32 on every backend (the transformer's stream)
  Storage storage = Storage::Compute;
};

inline OpCase linear_residual_case(const LinearResidual& p) {
  OpCase c;
  c.name = fmt::format("linear_residual_{}x{}x{}{}{}{}{}", p.n, p.k, p.m, p.bias ? "" : "_nobias",
                       p.gamma ? "" : "_nogamma", p.f32_residual ? "_f32residual" : "", detail::suffix(p.storage));
  c.storage = p.storage;
  c.bound = {kF32Sum, p.storage == Storage::Compute ? kBf16 : kTf32};
  c.run = [=](OpContext& ctx) {
    const float ws = detail::weight_scale(p.k);
    const DType rtype = p.f32_residual ? DType::F32 : ctx.act;
    const Tensor x = ctx.random({p.n, p.k}), w = ctx.random({p.m, p.k}, -ws, ws);
    const Tensor b = ctx.random({p.m}, -1, 1, DType::F32), g = ctx.random({p.m}, 0.25f, 2.0f, DType::F32);
    const Tensor residual = ctx.random({p.n, p.m}, -1, 1, rtype);
    const Tensor ref = naive::linear_residual(x, w, p.bias ? &b : nullptr, p.gamma ? &g : nullptr, residual);
    const Tensor db = ctx.device(b, DType::F32), dg = ctx.device(g, DType::F32);
    Tensor dres = ctx.device(residual, rtype);
    ctx.be.linear_residual(ctx.device(x), ctx.device(w), p.bias ? &db : nullptr, p.gamma ? &dg : nullptr, dres);
    ctx.expect(dres, ref, "residual");
  };
  return c;
}

struct LayerNorm {
  int64_t n, c;
  enum Affine { Both, WeightOnly, None } affine = Both;
  float eps = 1e-5f;        // 1e-5 (PyTorch's default) or 1e-6 (the encoder's)
  bool in_place = false;   // out is x (the DPT head normalises its rows in place)
  bool f32_input = false;  // x float32, out in the activation dtype (residual stream -> matmul input)
  float mean = 0.0f;       // added to every input
  double f32_bound = kF32Round;
  Storage storage = Storage::Compute;
};

inline OpCase layer_norm_case(const LayerNorm& p) {
  OpCase c;
  const char* affine = p.affine == LayerNorm::Both ? "" : p.affine == LayerNorm::WeightOnly ? "_noshift" : "_noaffine";
  c.name = fmt::format("layer_norm_{}x{}{}{}{}{}{}{}", p.n, p.c, affine, p.eps == 1e-6f ? "_eps1e6" : "",
                       p.in_place ? "_inplace" : "", p.f32_input ? "_f32in" : "", p.mean != 0 ? "_offset" : "",
                       detail::suffix(p.storage));
  c.storage = p.storage;
  c.bound = {p.f32_bound, p.storage == Storage::Compute ? kBf16 : kF32OnLowp};
  c.run = [=](OpContext& ctx) {
    const DType in_type = p.f32_input ? DType::F32 : ctx.act;
    const Tensor x = ctx.random({p.n, p.c}, p.mean - 1.0f, p.mean + 1.0f, in_type);
    const Tensor w = ctx.random({p.c}, 0.5f, 1.5f, DType::F32), b = ctx.random({p.c}, -0.5f, 0.5f, DType::F32);
    const Tensor* hw = p.affine != LayerNorm::None ? &w : nullptr;
    const Tensor* hb = p.affine == LayerNorm::Both ? &b : nullptr;
    const Tensor ref = naive::layer_norm(x, hw, hb, p.eps);
    const Tensor dw = ctx.device(w, DType::F32), db = ctx.device(b, DType::F32);
    Tensor dx = ctx.device(x, in_type);
    Tensor out = p.in_place ? dx : ctx.poisoned({p.n, p.c});
    ctx.be.layer_norm(dx, hw ? &dw : nullptr, hb ? &db : nullptr, p.eps, out);
    ctx.expect(out, ref);
  };
  return c;
}

struct SplitQkv {
  int64_t n;
  int heads, head_dim;
  bool qk_norm = false;
  bool k_bias = true;  // false: the k norm without a bias (QkNorm's pointers are independent)
  std::optional<RopeTable::Pairs> rope = std::nullopt;
  int64_t table_rows = 0;  // fewer than n: rows repeat (t % rows)
  Storage storage = Storage::Compute;
};

inline OpCase split_qkv_case(const SplitQkv& p) {
  OpCase c;
  std::string rope;
  if (p.rope)
    rope = fmt::format("_{}{}", *p.rope == RopeTable::Pairs::HalfSplit ? "halfsplit" : "interleaved", p.table_rows);
  c.name = fmt::format("split_qkv_{}x{}x{}{}{}{}{}", p.n, p.heads, p.head_dim, p.qk_norm ? "_qknorm" : "",
                       p.qk_norm && !p.k_bias ? "_nokbias" : "", rope, detail::suffix(p.storage));
  c.storage = p.storage;
  c.bound = {kF32Round, p.storage == Storage::Compute ? kBf16 : kF32OnLowp};
  c.run = [=](OpContext& ctx) {
    const int64_t C = int64_t{p.heads} * p.head_dim;
    const Tensor qkv = ctx.random({p.n, 3 * C}, -2.0f, 2.0f);
    const Tensor qw = ctx.random({p.head_dim}, 0.5f, 1.5f, DType::F32);
    const Tensor qb = ctx.random({p.head_dim}, -0.5f, 0.5f, DType::F32);
    const Tensor kw = ctx.random({p.head_dim}, 0.5f, 1.5f, DType::F32);
    const Tensor kb = ctx.random({p.head_dim}, -0.5f, 0.5f, DType::F32);
    const naive::HostQkNorm host_norm{&qw, &qb, &kw, p.k_bias ? &kb : nullptr, 1e-5f};
    naive::HostRope host_rope;
    if (p.rope) {
      // Real rotations: angles anywhere in (-pi, pi).
      const Tensor angle = ctx.random({p.table_rows, p.head_dim / 2}, -3.14f, 3.14f, DType::F32);
      host_rope.cos = Tensor::empty(angle.shape());
      host_rope.sin = Tensor::empty(angle.shape());
      for (int64_t i = 0; i < angle.numel(); ++i) {
        host_rope.cos.f32()[i] = std::cos(angle.f32()[i]);
        host_rope.sin.f32()[i] = std::sin(angle.f32()[i]);
      }
      host_rope.pairs = *p.rope;
    }
    const naive::Qkv ref =
        naive::split_qkv(qkv, p.heads, p.head_dim, p.qk_norm ? &host_norm : nullptr, p.rope ? &host_rope : nullptr);

    const Tensor dqw = ctx.device(qw, DType::F32), dqb = ctx.device(qb, DType::F32);
    const Tensor dkw = ctx.device(kw, DType::F32), dkb = ctx.device(kb, DType::F32);
    const QkNorm norm{&dqw, &dqb, &dkw, p.k_bias ? &dkb : nullptr, 1e-5f};
    RopeTable table;
    if (p.rope) table = {ctx.device(host_rope.cos, DType::F32), ctx.device(host_rope.sin, DType::F32), *p.rope};
    Tensor q = ctx.poisoned({p.n, C}), k = ctx.poisoned({p.n, C}), v = ctx.poisoned({p.n, C});
    ctx.be.split_qkv(ctx.device(qkv), p.heads, p.head_dim, p.qk_norm ? &norm : nullptr, p.rope ? &table : nullptr, q,
                     k, v);
    ctx.expect(q, ref.q, "q");
    ctx.expect(k, ref.k, "k");
    ctx.expect(v, ref.v, "v (a copy)", kExact);
  };
  return c;
}

inline OpCase attention_case(int groups, int64_t n, int heads, int head_dim, Storage s = Storage::Compute) {
  OpCase c;
  c.name = fmt::format("attention_{}x{}x{}x{}{}", groups, n, heads, head_dim, detail::suffix(s));
  c.storage = s;
  c.bound = {kF32Sum, s == Storage::Compute ? kBf16 : kF32OnLowp};
  c.run = [=](OpContext& ctx) {
    const Shape shape{groups * n, int64_t{heads} * head_dim};
    // q and k in [-2, 2]: scores of standard deviation ~1.3, a softmax far from uniform.
    const Tensor q = ctx.random(shape, -2, 2), k = ctx.random(shape, -2, 2), v = ctx.random(shape);
    const Tensor ref = naive::attention(q, k, v, groups, heads, head_dim);
    Tensor out = ctx.poisoned(shape);
    ctx.be.attention(ctx.device(q), ctx.device(k), ctx.device(v), groups, heads, head_dim, out);
    ctx.expect(out, ref);
  };
  return c;
}

inline OpCase copy_rows_case(const std::string& label, const Shape& src, const Shape& dst, const RowCopy& copy) {
  OpCase c;
  c.name = "copy_rows_" + label;
  c.bound = {kExact, kExact};
  c.run = [=](OpContext& ctx) {
    const Tensor hs = ctx.random(src);
    const Tensor hd = ctx.random(dst);  // not NaN: rows outside the blocks must keep these values
    const Tensor ref = naive::copy_rows(hs, hd, copy);
    Tensor d = ctx.device(hd);
    ctx.be.copy_rows(ctx.device(hs), d, copy);
    ctx.expect(d, ref, "dst");
  };
  return c;
}

inline OpCase concat_cols_case(int64_t n, int64_t ca, int64_t cb) {
  OpCase c;
  c.name = fmt::format("concat_cols_{}x{}_{}", n, ca, cb);
  c.bound = {kExact, kExact};
  c.run = [=](OpContext& ctx) {
    const Tensor a = ctx.random({n, ca}), b = ctx.random({n, cb});
    Tensor out = ctx.poisoned({n, ca + cb});
    ctx.be.concat_cols(ctx.device(a), ctx.device(b), out);
    ctx.expect(out, naive::concat_cols(a, b));
  };
  return c;
}

inline OpCase add_broadcast_case(const Shape& x, const Shape& y, bool y_f32 = false) {
  OpCase c;
  c.name = fmt::format("add_broadcast_{}_by_{}{}", detail::dims(x), detail::dims(y), y_f32 ? "_f32y" : "");
  c.bound = {kF32Round, kBf16};
  c.run = [=](OpContext& ctx) {
    const DType ytype = y_f32 ? DType::F32 : ctx.act;
    const Tensor hx = ctx.random(x), hy = ctx.random(y, -1, 1, ytype);
    const Tensor ref = naive::add_broadcast(hx, hy);
    Tensor dx = ctx.device(hx);
    ctx.be.add_broadcast(dx, ctx.device(hy, ytype));
    ctx.expect(dx, ref, "x");
  };
  return c;
}

// Which operands of an op that "may alias" share one device tensor.
enum class Alias { None, OutIsA, OutIsB, All };

inline OpCase add_case(const Shape& shape, Alias alias = Alias::None) {
  static const char* const kNames[] = {"", "_out_is_a", "_out_is_b", "_all_one"};
  OpCase c;
  c.name = fmt::format("add_{}{}", detail::dims(shape), kNames[static_cast<int>(alias)]);
  c.bound = {kF32Round, kBf16};
  c.run = [=](OpContext& ctx) {
    const Tensor a = ctx.random(shape), b = alias == Alias::All ? a : ctx.random(shape);
    const Tensor ref = naive::add(a, b);
    Tensor da = ctx.device(a);
    Tensor db = alias == Alias::All ? da : ctx.device(b);
    Tensor out = alias == Alias::None ? ctx.poisoned(shape) : alias == Alias::OutIsB ? db : da;
    ctx.be.add(da, db, out);
    ctx.expect(out, ref);
  };
  return c;
}

inline OpCase unary_case(const char* op, const Shape& shape, bool in_place) {
  const bool is_relu = std::string(op) == "relu";
  OpCase c;
  c.name = fmt::format("{}_{}{}", op, detail::dims(shape), in_place ? "_inplace" : "");
  c.bound = is_relu ? Bound{kExact, kExact} : Bound{kF32Round, kBf16};
  c.run = [=](OpContext& ctx) {
    const Tensor x = ctx.random(shape, -6.0f, 6.0f);  // silu's curved part and both tails
    const Tensor ref = is_relu ? naive::relu(x) : naive::silu(x);
    Tensor dx = ctx.device(x);
    Tensor out = in_place ? dx : ctx.poisoned(shape);
    if (is_relu)
      ctx.be.relu(dx, out);
    else
      ctx.be.silu(dx, out);
    ctx.expect(out, ref);
  };
  return c;
}

inline OpCase adaln_modulate_case(int64_t n, int64_t ch) {
  OpCase c;
  c.name = fmt::format("adaln_modulate_{}x{}", n, ch);
  c.bound = {kF32Round, kBf16};
  c.run = [=](OpContext& ctx) {
    const Tensor xn = ctx.random({n, ch}), mod = ctx.random({n, 3 * ch}), res = ctx.random({n, ch});
    Tensor out = ctx.poisoned({n, ch});
    ctx.be.adaln_modulate(ctx.device(xn), ctx.device(mod), ctx.device(res), out);
    ctx.expect(out, naive::adaln_modulate(xn, mod, res));
  };
  return c;
}

// ImageNet statistics, as the encoder uses them.
constexpr std::array<float, 3> kMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kStd = {0.229f, 0.224f, 0.225f};

inline OpCase patchify_case(int64_t b, int64_t h, int64_t w, int patch, Storage s = Storage::Compute) {
  OpCase c;
  c.name = fmt::format("patchify_{}x3x{}x{}_p{}{}", b, h, w, patch, detail::suffix(s));
  c.storage = s;
  c.bound = {kF32Round, s == Storage::Compute ? kBf16 : kF32OnLowp};
  c.run = [=](OpContext& ctx) {
    const Tensor images = ctx.random({b, 3, h, w}, 0.0f, 1.0f, DType::F32);  // images are float32 on every backend
    const int64_t rows = b * (h / patch) * (w / patch), cols = 3 * int64_t{patch} * patch;
    Tensor out = ctx.poisoned({rows, cols});
    ctx.be.patchify(ctx.device(images, DType::F32), patch, kMean, kStd, out);
    ctx.expect(out, naive::patchify(images, patch, kMean, kStd));
  };
  return c;
}

inline OpCase tokens_to_nchw_case(int64_t b, int h, int w, int64_t ch) {
  OpCase c;
  c.name = fmt::format("tokens_to_nchw_{}x{}x{}x{}", b, h, w, ch);
  c.bound = {kExact, kExact};
  c.run = [=](OpContext& ctx) {
    const Tensor tokens = ctx.random({b, int64_t{h} * w, ch});
    Tensor out = ctx.poisoned({b, ch, h, w});
    ctx.be.tokens_to_nchw(ctx.device(tokens), h, w, out);
    ctx.expect(out, naive::tokens_to_nchw(tokens, h, w));
  };
  return c;
}

struct Conv {
  Shape x;  // [B, Cin, H, W]
  int64_t cout, k;
  int stride = 1, pad = 0;
  bool bias = true;
};

// Convolutions run in float32 on every backend (the DPT head).
inline OpCase conv2d_case(const Conv& p) {
  OpCase c;
  c.name = fmt::format("conv2d_{}_to{}_k{}s{}p{}{}", detail::dims(p.x), p.cout, p.k, p.stride, p.pad,
                       p.bias ? "" : "_nobias");
  c.storage = Storage::F32;
  c.bound = {kF32Sum, kTf32};
  c.run = [=](OpContext& ctx) {
    const int64_t cin = p.x[1];
    const float ws = detail::weight_scale(cin * p.k * p.k);
    const Tensor x = ctx.random(p.x), w = ctx.random({p.cout, cin, p.k, p.k}, -ws, ws), b = ctx.random({p.cout});
    const Tensor ref = naive::conv2d(x, w, p.bias ? &b : nullptr, p.stride, p.pad);
    const Tensor db = ctx.device(b);
    Tensor out = ctx.poisoned(ref.shape());
    ctx.be.conv2d(ctx.device(x), ctx.device(w), p.bias ? &db : nullptr, p.stride, p.pad, out);
    ctx.expect(out, ref);
  };
  return c;
}

inline OpCase conv_transpose2d_case(const Shape& x, int64_t cout, int k, bool bias) {
  OpCase c;
  c.name = fmt::format("conv_transpose2d_{}_to{}_k{}{}", detail::dims(x), cout, k, bias ? "" : "_nobias");
  c.storage = Storage::F32;
  c.bound = {kF32Sum, kTf32};
  c.run = [=](OpContext& ctx) {
    const float ws = detail::weight_scale(x[1]);
    const Tensor hx = ctx.random(x), w = ctx.random({x[1], cout, k, k}, -ws, ws), b = ctx.random({cout});
    const Tensor ref = naive::conv_transpose2d(hx, w, bias ? &b : nullptr, k);
    const Tensor db = ctx.device(b);
    Tensor out = ctx.poisoned(ref.shape());
    ctx.be.conv_transpose2d(ctx.device(hx), ctx.device(w), bias ? &db : nullptr, k, out);
    ctx.expect(out, ref);
  };
  return c;
}

// resize_bilinear's `add`: none (the two-argument overload), one set of
// planes [C, oh, ow] repeated over the batch (the DPT head's position
// embedding), or a whole [B, C, oh, ow] tensor.
enum class ResizeAdd { None, Planes, Full };

inline OpCase resize_bilinear_case(const Shape& x, int64_t oh, int64_t ow, ResizeAdd add = ResizeAdd::None) {
  static const char* const kNames[] = {"", "_add_planes", "_add_full"};
  OpCase c;
  c.name = fmt::format("resize_bilinear_{}_to{}x{}{}", detail::dims(x), oh, ow, kNames[static_cast<int>(add)]);
  c.storage = Storage::F32;
  c.bound = {kF32Resize, kF32OnLowp};
  c.run = [=](OpContext& ctx) {
    const Tensor hx = ctx.random(x);
    const Shape out_shape{x[0], x[1], oh, ow};
    Tensor out = ctx.poisoned(out_shape);
    if (add == ResizeAdd::None) {
      ctx.be.resize_bilinear(ctx.device(hx), out);
      ctx.expect(out, naive::resize_bilinear(hx, nullptr, oh, ow));
      return;
    }
    const Tensor ha = ctx.random(add == ResizeAdd::Planes ? Shape{x[1], oh, ow} : out_shape);
    const Tensor da = ctx.device(ha);
    ctx.be.resize_bilinear(ctx.device(hx), &da, out);
    ctx.expect(out, naive::resize_bilinear(hx, &ha, oh, ow));
  };
  return c;
}

namespace detail {

// A resize_bilinear_add_axes case's inputs: x [B, C, H, W], the term by axis
// (by_col [Cc, ow] for the first Cc channels, by_row [C - Cc, oh] for the
// rest) and the same term whole, [C, oh, ow].
struct AxisCase {
  Tensor x, by_col, by_row, whole;
};
inline AxisCase axis_case(OpContext& ctx, const Shape& x, int64_t oh, int64_t ow, int64_t col_channels) {
  AxisCase a{ctx.random(x), ctx.random({col_channels, ow}, -1, 1, DType::F32),
             ctx.random({x[1] - col_channels, oh}, -1, 1, DType::F32), Tensor::empty({x[1], oh, ow})};
  for (int64_t ch = 0; ch < x[1]; ++ch)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx)
        a.whole.f32()[(ch * oh + y) * ow + xx] = ch < col_channels ? a.by_col.f32()[ch * ow + xx]
                                                                   : a.by_row.f32()[(ch - col_channels) * oh + y];
  return a;
}

}  // namespace detail

// resize_bilinear_add_axes: the term given by axis (by_col for the first
// `col_channels` channels, by_row for the rest) must give exactly what the
// same backend gives with the whole term as `add` (the DPT head relies on
// it: same values, one addition each), and the naive reference's values.
inline OpCase resize_bilinear_add_axes_case(const Shape& x, int64_t oh, int64_t ow, int64_t col_channels) {
  OpCase c;
  c.name = fmt::format("resize_bilinear_add_axes_{}_to{}x{}_c{}", detail::dims(x), oh, ow, col_channels);
  c.storage = Storage::F32;
  c.bound = {kF32Resize, kF32OnLowp};
  c.run = [=](OpContext& ctx) {
    const int64_t C = x[1];
    const auto [hx, by_col, by_row, whole] = detail::axis_case(ctx, x, oh, ow, col_channels);
    const Shape out_shape{x[0], C, oh, ow};
    Tensor out = ctx.poisoned(out_shape, DType::F32), with_whole = ctx.poisoned(out_shape, DType::F32);
    const Tensor dx = ctx.device(hx, DType::F32), dw = ctx.device(whole, DType::F32);
    ctx.be.resize_bilinear_add_axes(dx, ctx.device(by_col, DType::F32), ctx.device(by_row, DType::F32), out);
    ctx.be.resize_bilinear(dx, &dw, with_whole);
    ctx.expect(out, naive::resize_bilinear(hx, &whole, oh, ow));
    ctx.expect(out, ctx.be.download(with_whole), "out against the whole term", kExact);
  };
  return c;
}

// ---- the channels-last map ops: the naive NCHW reference, permuted ------------

namespace detail {

// The channels-last ops' maps: float32 (Storage::F32), or the backend's
// compute dtype (Storage::Compute: bfloat16 on the GPU and the CPU's bf16
// mode, the depth head's option depth_head_dtype bf16), named so.
inline const char* maps_suffix(Storage maps) { return maps == Storage::Compute ? "_maps_compute" : ""; }
inline Bound maps_bound(Storage maps, Bound f32_maps) {
  return maps == Storage::Compute ? Bound{f32_maps.f32, kBf16} : f32_maps;
}

}  // namespace detail

// conv2d_nhwc with its epilogue: out = act(conv + b + residual). The bias
// is float32 whatever the maps' dtype.
inline OpCase conv2d_nhwc_case(const Conv& p, Activation act = Activation::None, bool residual = false,
                               Storage maps = Storage::F32) {
  OpCase c;
  c.name = fmt::format("conv2d_nhwc_{}_to{}_k{}s{}p{}{}{}{}{}", detail::dims(p.x), p.cout, p.k, p.stride, p.pad,
                       p.bias ? "" : "_nobias", detail::act_name(act), residual ? "_residual" : "",
                       detail::maps_suffix(maps));
  c.storage = maps;
  c.bound = detail::maps_bound(maps, {kF32Sum, kTf32});
  c.run = [=](OpContext& ctx) {
    const int64_t cin = p.x[1];
    const float ws = detail::weight_scale(cin * p.k * p.k);
    const Tensor x = ctx.random(p.x), w = ctx.random({p.cout, cin, p.k, p.k}, -ws, ws);
    const Tensor b = ctx.random({p.cout}, -1, 1, DType::F32);
    Tensor ref = naive::channels_last(naive::conv2d(x, w, p.bias ? &b : nullptr, p.stride, p.pad));
    const Tensor r = ctx.random(ref.shape());
    for (int64_t i = 0; i < ref.numel(); ++i) {
      float v = ref.f32()[i] + (residual ? r.f32()[i] : 0.0f);
      ref.f32()[i] = act == Activation::Relu ? std::max(v, 0.0f) : v;
    }
    const Tensor db = ctx.device(b, DType::F32), dr = ctx.device(r);
    Tensor out = ctx.poisoned(ref.shape());
    ctx.be.conv2d_nhwc(ctx.device(naive::channels_last(x)), ctx.device(naive::channels_last(w)),
                       p.bias ? &db : nullptr, p.stride, p.pad, out,
                       {.act = act, .residual = residual ? &dr : nullptr});
    ctx.expect(out, ref);
  };
  return c;
}

inline OpCase conv_transpose2d_nhwc_case(const Shape& x, int64_t cout, int k, bool bias, Storage maps = Storage::F32) {
  OpCase c;
  c.name = fmt::format("conv_transpose2d_nhwc_{}_to{}_k{}{}{}", detail::dims(x), cout, k, bias ? "" : "_nobias",
                       detail::maps_suffix(maps));
  c.storage = maps;
  c.bound = detail::maps_bound(maps, {kF32Sum, kTf32});
  c.run = [=](OpContext& ctx) {
    const float ws = detail::weight_scale(x[1]);
    const Tensor hx = ctx.random(x), w = ctx.random({x[1], cout, k, k}, -ws, ws);
    const Tensor b = ctx.random({cout}, -1, 1, DType::F32);
    const Tensor ref = naive::channels_last(naive::conv_transpose2d(hx, w, bias ? &b : nullptr, k));
    const Tensor db = ctx.device(b, DType::F32);
    Tensor out = ctx.poisoned(ref.shape());
    ctx.be.conv_transpose2d_nhwc(ctx.device(naive::channels_last(hx)), ctx.device(w), bias ? &db : nullptr, k,
                                 out);
    ctx.expect(out, ref);
  };
  return c;
}

// x: [B, C, H, W] as the naive reference takes it; the op sees it channels
// last. add: none, one [oh, ow, C] map repeated over the batch (the DPT
// head's position embedding), or a whole output's worth.
inline OpCase resize_bilinear_nhwc_case(const Shape& x, int64_t oh, int64_t ow, ResizeAdd add = ResizeAdd::None,
                                        Storage maps = Storage::F32) {
  static const char* const kNames[] = {"", "_add_map", "_add_full"};
  OpCase c;
  c.name = fmt::format("resize_bilinear_nhwc_{}_to{}x{}{}{}", detail::dims(x), oh, ow, kNames[static_cast<int>(add)],
                       detail::maps_suffix(maps));
  c.storage = maps;
  c.bound = detail::maps_bound(maps, {kF32Resize, kF32OnLowp});
  c.run = [=](OpContext& ctx) {
    const Tensor hx = ctx.random(x);
    const Tensor dx = ctx.device(naive::channels_last(hx));
    Tensor out = ctx.poisoned({x[0], oh, ow, x[1]});
    if (add == ResizeAdd::None) {
      ctx.be.resize_bilinear_nhwc(dx, nullptr, out);
      ctx.expect(out, naive::channels_last(naive::resize_bilinear(hx, nullptr, oh, ow)));
      return;
    }
    // The term channels first for the reference, channels last for the op.
    const Shape nchw = add == ResizeAdd::Planes ? Shape{1, x[1], oh, ow} : Shape{x[0], x[1], oh, ow};
    const Tensor ha = ctx.random(nchw);
    const Tensor ha_last = naive::channels_last(ha);
    const Tensor da = ctx.device(add == ResizeAdd::Planes ? ha_last.reshape({oh, ow, x[1]}) : ha_last);
    ctx.be.resize_bilinear_nhwc(dx, &da, out);
    const Tensor ha_ref = add == ResizeAdd::Planes ? ha.reshape({x[1], oh, ow}) : ha;
    ctx.expect(out, naive::channels_last(naive::resize_bilinear(hx, &ha_ref, oh, ow)));
  };
  return c;
}

inline OpCase resize_bilinear_add_axes_nhwc_case(const Shape& x, int64_t oh, int64_t ow, int64_t col_channels,
                                                  Storage maps = Storage::F32) {
  OpCase c;
  c.name = fmt::format("resize_bilinear_add_axes_nhwc_{}_to{}x{}_c{}{}", detail::dims(x), oh, ow, col_channels,
                       detail::maps_suffix(maps));
  c.storage = maps;
  c.bound = detail::maps_bound(maps, {kF32Resize, kF32OnLowp});
  c.run = [=](OpContext& ctx) {
    const int64_t C = x[1];
    const auto [hx, by_col, by_row, whole] = detail::axis_case(ctx, x, oh, ow, col_channels);
    Tensor out = ctx.poisoned({x[0], oh, ow, C});  // the position tables stay float32
    ctx.be.resize_bilinear_add_axes_nhwc(ctx.device(naive::channels_last(hx)),
                                         ctx.device(by_col, DType::F32), ctx.device(by_row, DType::F32), out);
    ctx.expect(out, naive::channels_last(naive::resize_bilinear(hx, &whole, oh, ow)));
  };
  return c;
}

// ---- memory ops: exact on every backend ----------------------------------------

// Values over many binades, both signs, and exact ties of bfloat16 and
// float16 (1 + 2^-8 and 1 + 3 * 2^-8; 1 + 2^-11 and 1 + 3 * 2^-11), which
// round to nearest even in opposite directions.
inline Tensor conversion_values(OpContext& ctx, int64_t n) {
  Tensor t = ctx.random({n}, -300.0f, 300.0f, DType::F32);
  const Tensor small = ctx.random({n / 3}, -1e-3f, 1e-3f, DType::F32);
  std::copy_n(small.f32(), small.numel(), t.f32());
  const float ties[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 1.0f + 0x1p-11f,
                        1.0f + 3 * 0x1p-11f, 256.0f + 0.5f, 0.0f, -0.0f};
  std::copy(std::begin(ties), std::end(ties), t.f32() + n / 3);
  return t;
}

// How a host tensor reaches the device: upload() (a new tensor),
// upload_into() (a destination written every step) or upload_once_into()
// (written once; the host tensor may go as soon as the call returns).
enum class UploadKind { New, Into, OnceInto };

inline OpCase upload_case(DType dtype, UploadKind kind) {
  OpCase c;
  const char* names[] = {"upload", "upload_into", "upload_once_into"};
  c.name = fmt::format("{}_{}_3x1001", names[static_cast<int>(kind)], detail::dtype_label(dtype));
  c.bound = {kExact, kExact};
  c.run = [=](OpContext& ctx) {
    const Tensor host = conversion_values(ctx, 3 * 1001).reshape({3, 1001});
    Tensor dev;
    if (kind == UploadKind::Into) {
      dev = ctx.poisoned({3, 1001}, dtype);
      ctx.be.upload_into(host, dev);
    } else if (kind == UploadKind::OnceInto) {
      dev = ctx.poisoned({3, 1001}, dtype);
      {
        Tensor gone = host.clone();  // released, and overwritten, before the copy is awaited
        ctx.be.upload_once_into(gone, dev);
        std::fill_n(gone.f32(), gone.numel(), std::numeric_limits<float>::quiet_NaN());
      }
    } else {
      dev = ctx.be.upload(host.clone(), dtype);
    }
    EXPECT_EQ(dev.dtype(), dtype);
    EXPECT_EQ(dev.device(), ctx.be.device());
    EXPECT_EQ(dev.shape(), host.shape());
    ctx.expect(dev, naive::rounded(host, dtype), "download", kExact);
  };
  return c;
}

inline OpCase convert_case(DType from, DType to) {
  OpCase c;
  c.name = fmt::format("convert_{}_to_{}", detail::dtype_label(from), detail::dtype_label(to));
  c.bound = {kExact, kExact};
  c.run = [=](OpContext& ctx) {
    const Tensor host = conversion_values(ctx, 999).reshape({27, 37});
    const Tensor src = ctx.be.upload(host.clone(), from);
    Tensor dst = ctx.poisoned({27, 37}, to);
    ctx.be.convert(src, dst);
    ctx.expect(dst, naive::rounded(naive::rounded(host, from), to), "dst", kExact);
  };
  return c;
}

// The asynchronous read-back of the model's (float32) outputs: valid once a
// fence taken after the copy has passed.
inline OpCase download_async_case() {
  OpCase c;
  c.name = "download_async_3x1001";
  c.storage = Storage::F32;
  c.bound = {kExact, kExact};
  c.run = [](OpContext& ctx) {
    const Tensor values = ctx.random({3, 1001});
    const Tensor dev = ctx.device(values);
    Tensor host = ctx.be.alloc_host({3, 1001}, DType::F32);
    ctx.be.download_async(dev, host);
    ctx.be.wait(ctx.be.fence());
    EXPECT_TRUE(close(host, values, kExact, "host"));
  };
  return c;
}

// fill on the dtypes a backend's own tensors have (its compute dtype and float32).
inline OpCase fill_case(Storage s) {
  OpCase c;
  c.name = "fill_1001" + detail::suffix(s);
  c.storage = s;
  c.bound = {kExact, kExact};
  c.run = [=](OpContext& ctx) {
    Tensor t = ctx.be.alloc({1001}, ctx.act);
    ctx.be.fill(t, 0.1f);
    Tensor ref = Tensor::empty({1001});
    std::fill(ref.f32(), ref.f32() + 1001, naive::round_to(0.1f, ctx.act));
    ctx.expect(t, ref, "fill 0.1", kExact);
    ctx.be.fill(t, std::numeric_limits<float>::quiet_NaN());
    const Tensor back = ctx.be.download(t);
    int64_t not_nan = 0;
    for (int64_t i = 0; i < back.numel(); ++i) not_nan += std::isnan(back.f32()[i]) ? 0 : 1;
    EXPECT_EQ(not_nan, 0) << "fill NaN left elements that are not NaN";
  };
  return c;
}

// ---- KV cache: make_kv_cache, then append / attend step by step ---------------

struct KvScenario {
  std::string label;
  kv::Layout layout;
  kv::CacheConfig config;
  kv::TokenLayout tokens;
  int blocks = 2;
  std::vector<std::pair<int, bool>> steps;  // (frames, store)
  Storage storage = Storage::Compute;
};

inline OpCase kv_cache_case(const KvScenario& p) {
  OpCase c;
  c.name = fmt::format("kv_{}_{}{}", p.layout == kv::Layout::Dense ? "dense" : "paged", p.label,
                       detail::suffix(p.storage));
  c.storage = p.storage;
  c.bound = {kF32Sum, p.storage == Storage::Compute ? kBf16 : kF32OnLowp};
  c.run = [=](OpContext& ctx) {
    std::unique_ptr<kv::KvCache> cache = ctx.be.make_kv_cache(p.layout, p.config, p.tokens, p.blocks);
    naive::KvCache model(p.config, p.tokens, p.blocks);
    const int64_t tpf = p.tokens.tokens_per_frame();
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const auto [frames, store] = p.steps[s];
      cache->begin_step(frames, store);
      model.begin_step(frames, store);
      const Shape shape{frames * tpf, p.tokens.num_heads, p.tokens.head_dim};
      for (int i = 0; i < p.blocks; ++i) {
        const int block = s % 2 == 0 ? i : p.blocks - 1 - i;  // "any block order"
        const Tensor k = ctx.random(shape, -2, 2), v = ctx.random(shape), q = ctx.random(shape, -2, 2);
        const Tensor dk = ctx.device(k), dv = ctx.device(v), dq = ctx.device(q);
        cache->append(block, dk, dv);
        model.append(block, k, v);
        Tensor out = ctx.poisoned(shape);
        cache->attend(block, dq, out);
        ctx.expect(out, model.attend(block, q),
                   fmt::format("step {} ({} frames, {}) block {}", s, frames, store ? "stored" : "not stored", block));
      }
      cache->end_step();
      model.end_step();
    }
  };
  return c;
}

// ---- the table -------------------------------------------------------------------

inline std::vector<OpCase> make_op_cases() {
  using A = Activation;
  using P = RopeTable::Pairs;
  constexpr Storage F32 = Storage::F32;
  std::vector<OpCase> t;

  // Dense layers: odd sizes, 1x1x1, each activation, bias or not; the
  // larger ones split across threads; float32 variants (the heads).
  t.push_back(linear_case(1, 1, 1, true, A::None));
  t.push_back(linear_case(5, 3, 7, true, A::None));
  t.push_back(linear_case(33, 70, 17, true, A::Gelu));
  t.push_back(linear_case(33, 70, 17, false, A::Relu));
  t.push_back(linear_case(7, 129, 1, true, A::Relu));
  t.push_back(linear_case(64, 256, 96, true, A::Gelu));
  t.push_back(linear_case(130, 64, 300, false, A::None));
  t.push_back(linear_case(33, 70, 17, true, A::Gelu, F32));
  t.push_back(linear_case(3, 512, 100, false, A::None, F32));
  t.push_back(linear_case(8, 96, 40, true, A::Relu, F32));

  t.push_back(linear_bf16_weights_case(1, 2048, 96, false));
  t.push_back(linear_bf16_weights_case(3, 37, 20, false));
  t.push_back(linear_bf16_weights_case(11, 256, 40, false));
  t.push_back(linear_bf16_weights_case(1, 512, 70, true));
  t.push_back(linear_bf16_weights_case(9, 96, 33, true));
  t.push_back(linear_residual_case({.n = 33, .k = 70, .m = 17}));
  t.push_back(linear_residual_case({.n = 5, .k = 3, .m = 7, .bias = false, .gamma = false}));
  t.push_back(linear_residual_case({.n = 3, .k = 9, .m = 5, .bias = false}));
  t.push_back(linear_residual_case({.n = 17, .k = 64, .m = 40, .gamma = false, .f32_residual = true}));
  t.push_back(linear_residual_case({.n = 1, .k = 64, .m = 64, .gamma = false, .f32_residual = true}));
  t.push_back(linear_residual_case({.n = 64, .k = 256, .m = 96, .storage = F32}));
  t.push_back(linear_residual_case({.n = 8, .k = 33, .m = 9, .bias = false, .storage = F32}));

  t.push_back(layer_norm_case({.n = 5, .c = 7}));
  t.push_back(layer_norm_case({.n = 1, .c = 1}));
  t.push_back(layer_norm_case({.n = 33, .c = 64, .in_place = true}));
  t.push_back(layer_norm_case({.n = 3, .c = 1001, .affine = LayerNorm::None, .eps = 1e-6f}));
  t.push_back(layer_norm_case({.n = 8, .c = 96, .affine = LayerNorm::WeightOnly}));
  t.push_back(layer_norm_case({.n = 300, .c = 128}));
  t.push_back(layer_norm_case({.n = 17, .c = 256, .f32_input = true}));
  // Values near 100 with a spread of 1: the variance must be taken about
  // the mean (E[x^2] - mean^2 in float32 would lose everything). The
  // float32 mean itself carries ~100 * 2^-24 = 6e-6 of the spread, hence 2e-5.
  t.push_back(layer_norm_case({.n = 64, .c = 256, .mean = 100.0f, .f32_bound = 2e-5}));
  t.push_back(layer_norm_case({.n = 8, .c = 512, .affine = LayerNorm::None, .eps = 1e-6f, .storage = F32}));
  t.push_back(layer_norm_case({.n = 9, .c = 40, .in_place = true, .storage = F32}));

  // q/k/v: qk-norm on and off, both RoPE pairings, tables shorter than the
  // token count (rows repeat), the model's head_dim 64.
  t.push_back(split_qkv_case({.n = 5, .heads = 3, .head_dim = 8}));
  t.push_back(split_qkv_case({.n = 5, .heads = 3, .head_dim = 8, .qk_norm = true}));
  t.push_back(split_qkv_case({.n = 5, .heads = 3, .head_dim = 8, .rope = P::HalfSplit, .table_rows = 3}));
  t.push_back(split_qkv_case({.n = 5, .heads = 3, .head_dim = 8, .rope = P::Interleaved, .table_rows = 5}));
  t.push_back(split_qkv_case({.n = 7, .heads = 2, .head_dim = 4, .qk_norm = true, .k_bias = false,
                              .rope = P::HalfSplit, .table_rows = 1}));
  t.push_back(split_qkv_case({.n = 6, .heads = 3, .head_dim = 12, .qk_norm = true, .rope = P::Interleaved,
                              .table_rows = 4}));
  t.push_back(split_qkv_case({.n = 6, .heads = 3, .head_dim = 12, .qk_norm = true, .rope = P::HalfSplit,
                              .table_rows = 6}));
  t.push_back(split_qkv_case({.n = 40, .heads = 4, .head_dim = 64, .qk_norm = true, .rope = P::HalfSplit,
                              .table_rows = 20}));
  t.push_back(split_qkv_case({.n = 40, .heads = 4, .head_dim = 64, .qk_norm = true, .rope = P::Interleaved,
                              .table_rows = 40}));
  t.push_back(split_qkv_case({.n = 200, .heads = 2, .head_dim = 64, .qk_norm = true, .rope = P::HalfSplit,
                              .table_rows = 100}));
  t.push_back(split_qkv_case({.n = 8, .heads = 4, .head_dim = 32}));
  t.push_back(split_qkv_case({.n = 40, .heads = 4, .head_dim = 64, .qk_norm = true, .rope = P::Interleaved,
                              .table_rows = 40, .storage = F32}));
  t.push_back(split_qkv_case({.n = 9, .heads = 2, .head_dim = 16, .rope = P::HalfSplit, .table_rows = 9,
                              .storage = F32}));

  // Attention: one token (out = v), groups > 1, odd lengths, head_dim 64,
  // more keys than a 128-row tile.
  t.push_back(attention_case(1, 1, 1, 8));
  t.push_back(attention_case(1, 5, 2, 8));
  t.push_back(attention_case(3, 7, 2, 16));
  t.push_back(attention_case(4, 16, 3, 32));
  t.push_back(attention_case(2, 33, 4, 64));
  t.push_back(attention_case(2, 100, 4, 16));
  t.push_back(attention_case(1, 130, 2, 64));
  t.push_back(attention_case(5, 3, 1, 3));
  t.push_back(attention_case(3, 7, 2, 16, F32));
  t.push_back(attention_case(2, 33, 4, 64, F32));

  // Row copies: the model's patterns (patches into token matrices, special
  // tokens broadcast with a zero source stride, single columns) and odd ones.
  t.push_back(copy_rows_case("patches_into_tokens", {3 * 10, 16}, {3 * 12, 16}, {3, 10, 16, 0, 10, 2, 12}));
  t.push_back(copy_rows_case("broadcast_block", {2, 8}, {3 * 5, 8}, {3, 2, 8, 0, 0, 0, 5}));
  t.push_back(copy_rows_case("one_column", {8, 9}, {8, 2}, {8, 2, 1, 7, 9, 0, 2}));
  t.push_back(copy_rows_case("column_back", {8, 2}, {8, 9}, {8, 2, 1, 0, 2, 7, 9}));
  t.push_back(copy_rows_case("flat", {3, 4, 5}, {3, 4, 5}, {1, 60, 1, 0, 0, 0, 0}));
  t.push_back(copy_rows_case("odd", {10, 3}, {12, 3}, {3, 2, 3, 1, 3, 2, 4}));
  t.push_back(copy_rows_case("rows_out_of_frames", {2 * 7, 5}, {2 * 4, 5}, {2, 4, 5, 3, 7, 0, 4}));

  t.push_back(concat_cols_case(5, 3, 7));
  t.push_back(concat_cols_case(3, 5, 3));
  t.push_back(concat_cols_case(1, 1, 1));
  t.push_back(concat_cols_case(300, 64, 64));

  t.push_back(add_broadcast_case({4, 33}, {33}));
  t.push_back(add_broadcast_case({7, 3}, {1}));
  t.push_back(add_broadcast_case({2, 5, 3, 4}, {5, 3, 4}));
  t.push_back(add_broadcast_case({6, 10}, {6, 10}));
  t.push_back(add_broadcast_case({4, 33}, {33}, true));
  t.push_back(add_broadcast_case({300, 128}, {128}));

  t.push_back(add_case({1001}));
  t.push_back(add_case({1001}, Alias::OutIsA));
  t.push_back(add_case({7, 3}, Alias::OutIsB));
  t.push_back(add_case({5, 5}, Alias::All));
  t.push_back(add_case({2, 3, 4, 5}));
  t.push_back(add_case({40000}));
  t.push_back(unary_case("relu", {1001}, false));
  t.push_back(unary_case("relu", {7, 3}, true));
  t.push_back(unary_case("relu", {40000}, false));
  t.push_back(unary_case("silu", {1001}, false));
  t.push_back(unary_case("silu", {7, 3}, true));
  t.push_back(unary_case("silu", {40000}, true));

  t.push_back(adaln_modulate_case(1, 1));
  t.push_back(adaln_modulate_case(5, 7));
  t.push_back(adaln_modulate_case(8, 64));
  t.push_back(adaln_modulate_case(300, 128));

  // Images and feature maps.
  t.push_back(patchify_case(3, 6, 9, 3));
  t.push_back(patchify_case(1, 4, 4, 1));
  t.push_back(patchify_case(2, 28, 42, 14));
  t.push_back(patchify_case(2, 10, 15, 5, F32));

  t.push_back(tokens_to_nchw_case(3, 5, 7, 33));
  t.push_back(tokens_to_nchw_case(2, 1, 1, 40));
  t.push_back(tokens_to_nchw_case(1, 27, 36, 16));
  t.push_back(tokens_to_nchw_case(2, 4, 3, 5));
  // More positions than the GPU kernel's grid has rows of tiles (65,535 x 32):
  // the depth head's two-channel output of a large frame, channels last.
  t.push_back(tokens_to_nchw_case(1, 1024, 2100, 2));

  // Convolutions: strides 1-3, padding 0-2, 1x1 (the pointwise path and a
  // strided 1x1 that is not), kernels 3 and 5, bias or not.
  t.push_back(conv2d_case({.x = {2, 3, 7, 5}, .cout = 4, .k = 3, .stride = 2, .pad = 1}));
  t.push_back(conv2d_case({.x = {1, 5, 4, 4}, .cout = 3, .k = 1, .bias = false}));
  t.push_back(conv2d_case({.x = {1, 2, 3, 3}, .cout = 1, .k = 3}));
  t.push_back(conv2d_case({.x = {1, 8, 20, 20}, .cout = 8, .k = 3, .pad = 1}));
  t.push_back(conv2d_case({.x = {2, 4, 9, 11}, .cout = 6, .k = 3, .stride = 2, .bias = false}));
  t.push_back(conv2d_case({.x = {1, 3, 8, 8}, .cout = 2, .k = 1, .stride = 2}));
  t.push_back(conv2d_case({.x = {1, 4, 6, 6}, .cout = 3, .k = 5, .pad = 2}));
  t.push_back(conv2d_case({.x = {1, 3, 5, 5}, .cout = 2, .k = 3, .stride = 3, .pad = 1}));
  t.push_back(conv2d_case({.x = {1, 16, 12, 16}, .cout = 4, .k = 1}));
  // Channel counts off oneDNN's 16-channel blocks (padded inside its layouts).
  t.push_back(conv2d_case({.x = {2, 40, 9, 13}, .cout = 24, .k = 3, .pad = 1}));

  t.push_back(conv_transpose2d_case({2, 3, 2, 3}, 5, 3, false));
  t.push_back(conv_transpose2d_case({1, 4, 3, 3}, 2, 2, true));
  t.push_back(conv_transpose2d_case({1, 6, 4, 5}, 3, 4, true));
  t.push_back(conv_transpose2d_case({2, 2, 1, 1}, 3, 1, true));

  // Bilinear resize (align_corners): up, down, to and from 1x1, identity, with `add`.
  t.push_back(resize_bilinear_case({1, 2, 14, 18}, 27, 36));
  t.push_back(resize_bilinear_case({2, 3, 1, 1}, 4, 5));
  t.push_back(resize_bilinear_case({1, 2, 5, 7}, 1, 1));
  t.push_back(resize_bilinear_case({1, 1, 3, 4}, 3, 4));
  t.push_back(resize_bilinear_case({1, 2, 9, 9}, 4, 4));
  t.push_back(resize_bilinear_case({2, 2, 4, 6}, 7, 11, ResizeAdd::Planes));
  t.push_back(resize_bilinear_case({1, 3, 5, 5}, 9, 9, ResizeAdd::Full));
  t.push_back(resize_bilinear_case({2, 3, 1, 1}, 2, 3, ResizeAdd::Planes));
  t.push_back(resize_bilinear_case({2, 16, 27, 36}, 54, 72, ResizeAdd::Planes));
  t.push_back(resize_bilinear_add_axes_case({1, 8, 14, 18}, 27, 36, 4));
  t.push_back(resize_bilinear_add_axes_case({2, 5, 4, 6}, 7, 11, 2));
  t.push_back(resize_bilinear_add_axes_case({1, 3, 5, 5}, 9, 9, 0));
  // Channels last: channel counts of 4k (the GPU's vector path) and others.
  t.push_back(conv2d_nhwc_case({.x = {2, 3, 7, 5}, .cout = 4, .k = 3, .stride = 2, .pad = 1}));
  t.push_back(conv2d_nhwc_case({.x = {1, 8, 20, 20}, .cout = 8, .k = 3, .pad = 1}, Activation::Relu));
  t.push_back(conv2d_nhwc_case({.x = {2, 8, 9, 13}, .cout = 8, .k = 3, .pad = 1}, Activation::None, true));
  t.push_back(conv2d_nhwc_case({.x = {1, 5, 6, 6}, .cout = 3, .k = 3, .pad = 1}, Activation::Relu, true));
  t.push_back(conv2d_nhwc_case({.x = {1, 16, 12, 16}, .cout = 2, .k = 1}));
  t.push_back(conv2d_nhwc_case({.x = {2, 40, 9, 13}, .cout = 24, .k = 3, .pad = 1, .bias = false}));
  // Channels in multiples of 32 (the depth head's): the CPU's AMX kernel
  // where the backend has it.
  t.push_back(conv2d_nhwc_case({.x = {1, 64, 7, 9}, .cout = 32, .k = 3, .pad = 1}, Activation::Relu, true));
  t.push_back(conv2d_nhwc_case({.x = {2, 32, 6, 5}, .cout = 64, .k = 3, .stride = 2, .pad = 1, .bias = false}));
  t.push_back(conv2d_nhwc_case({.x = {1, 96, 5, 7}, .cout = 288, .k = 1}));
  t.push_back(conv_transpose2d_nhwc_case({2, 3, 2, 3}, 5, 3, false));
  t.push_back(conv_transpose2d_nhwc_case({1, 6, 4, 5}, 8, 4, true));
  t.push_back(conv_transpose2d_nhwc_case({2, 4, 3, 3}, 4, 2, true));
  t.push_back(resize_bilinear_nhwc_case({1, 2, 14, 18}, 27, 36));
  t.push_back(resize_bilinear_nhwc_case({2, 8, 4, 6}, 7, 11));
  t.push_back(resize_bilinear_nhwc_case({1, 3, 5, 7}, 1, 1));
  t.push_back(resize_bilinear_nhwc_case({2, 4, 4, 6}, 7, 11, ResizeAdd::Planes));
  t.push_back(resize_bilinear_nhwc_case({2, 3, 5, 5}, 9, 9, ResizeAdd::Full));
  t.push_back(resize_bilinear_nhwc_case({2, 16, 27, 36}, 54, 72, ResizeAdd::Planes));
  t.push_back(resize_bilinear_add_axes_nhwc_case({1, 8, 14, 18}, 27, 36, 4));
  t.push_back(resize_bilinear_add_axes_nhwc_case({2, 5, 4, 6}, 7, 11, 2));
  t.push_back(resize_bilinear_add_axes_nhwc_case({1, 4, 5, 5}, 9, 9, 0));
  // The same ops on maps of the compute dtype (bfloat16 on the GPU and in the
  // CPU's bf16 mode): vector (channels 4k) and scalar paths, every epilogue.
  constexpr Storage kMaps = Storage::Compute;
  t.push_back(conv2d_nhwc_case({.x = {2, 8, 9, 13}, .cout = 8, .k = 3, .pad = 1}, Activation::Relu, true, kMaps));
  t.push_back(conv2d_nhwc_case({.x = {2, 3, 7, 5}, .cout = 4, .k = 3, .stride = 2, .pad = 1}, Activation::None, false,
                               kMaps));
  t.push_back(conv2d_nhwc_case({.x = {1, 6, 6, 6}, .cout = 3, .k = 3, .pad = 1}, Activation::Relu, true, kMaps));
  t.push_back(conv2d_nhwc_case({.x = {1, 16, 12, 16}, .cout = 2, .k = 1}, Activation::None, false, kMaps));
  t.push_back(conv2d_nhwc_case({.x = {2, 40, 9, 13}, .cout = 24, .k = 3, .pad = 1, .bias = false}, Activation::None,
                               true, kMaps));
  t.push_back(conv_transpose2d_nhwc_case({1, 6, 4, 5}, 8, 4, true, kMaps));
  t.push_back(conv_transpose2d_nhwc_case({2, 3, 2, 3}, 5, 3, false, kMaps));
  t.push_back(resize_bilinear_nhwc_case({2, 8, 4, 6}, 7, 11, ResizeAdd::None, kMaps));
  t.push_back(resize_bilinear_nhwc_case({2, 3, 5, 5}, 9, 9, ResizeAdd::Full, kMaps));
  t.push_back(resize_bilinear_nhwc_case({2, 16, 27, 36}, 54, 72, ResizeAdd::Planes, kMaps));
  t.push_back(resize_bilinear_add_axes_nhwc_case({1, 8, 14, 18}, 27, 36, 4, kMaps));
  t.push_back(resize_bilinear_add_axes_nhwc_case({2, 5, 4, 6}, 7, 11, 2, kMaps));

  // Memory.
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.push_back(upload_case(d, UploadKind::New));
    t.push_back(upload_case(d, UploadKind::Into));
    t.push_back(upload_case(d, UploadKind::OnceInto));
  }
  for (DType from : {DType::F32, DType::BF16, DType::F16})
    for (DType to : {DType::F32, DType::BF16, DType::F16}) t.push_back(convert_case(from, to));
  t.push_back(fill_case(Storage::Compute));
  t.push_back(fill_case(F32));
  t.push_back(download_async_case());

  // KV caches, both layouts: eviction with retained specials, camera-only
  // specials, no retention, upstream's include_scale_frames quirk, one-token
  // frames (never evicted), steps larger than the window, non-keyframes.
  const kv::TokenLayout small{.num_special = 2, .num_patches = 3, .num_heads = 2, .head_dim = 8};
  const kv::TokenLayout camera{.num_special = 1, .num_patches = 0, .num_heads = 2, .head_dim = 16};
  const kv::TokenLayout model_like{.num_special = 6, .num_patches = 10, .num_heads = 4, .head_dim = 64};
  const std::vector<std::pair<int, bool>> stream = {{2, true}, {1, true}, {1, false}, {1, true},
                                                    {1, true}, {1, false}, {1, true}};
  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    t.push_back(kv_cache_case({"w2s1", layout, {.sliding_window = 2, .scale_frames = 1}, small, 2, stream}));
    t.push_back(kv_cache_case({"w1s0_camera_only", layout,
                               {.sliding_window = 1, .scale_frames = 0, .camera_only = true}, small, 2,
                               {{1, true}, {1, true}, {1, true}, {1, false}, {1, true}, {2, true}}}));
    t.push_back(kv_cache_case({"w2s2_no_specials", layout,
                               {.sliding_window = 2, .scale_frames = 2, .cross_frame_special = false}, small, 1,
                               {{3, true}, {1, true}, {1, true}, {1, false}, {1, true}}}));
    t.push_back(kv_cache_case({"w2s1_drop_scale", layout,
                               {.sliding_window = 2, .scale_frames = 1, .include_scale_frames = false}, small, 2,
                               {{2, true}, {1, true}, {1, true}, {1, true}, {1, false}, {1, true}, {1, true}}}));
    t.push_back(kv_cache_case({"camera_tokens", layout, {.sliding_window = 2, .scale_frames = 1}, camera, 2,
                               {{2, true}, {1, true}, {1, true}, {1, false}, {1, true}, {1, true}}}));
    t.push_back(kv_cache_case({"w2s0_steps_over_window", layout,
                               {.sliding_window = 2, .scale_frames = 0, .pool_growth_pages = 1}, small, 2,
                               {{3, true}, {3, false}, {3, true}, {1, true}}}));
    t.push_back(kv_cache_case({"w3s2_model_like", layout, {.sliding_window = 3, .scale_frames = 2}, model_like, 3,
                               {{4, true}, {1, true}, {1, false}, {1, true}, {2, true}, {1, true}}}));
    t.push_back(kv_cache_case({"w2s1", layout, {.sliding_window = 2, .scale_frames = 1}, small, 2, stream, F32}));
  }
  return t;
}

inline const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = make_op_cases();
  return cases;
}

// ---- backends and the parametrised test ------------------------------------------

// A backend the table runs on. acquire() gives the backend, or null with
// `why` set when it cannot run here (the test then skips, saying why).
struct BackendUnderTest {
  std::string name;  // the test-name prefix: "Cpu1", "Cuda"
  std::function<std::shared_ptr<Backend>(std::string* why)> acquire;
};

inline void PrintTo(const BackendUnderTest& b, std::ostream* os) { *os << b.name; }

using OpParam = std::tuple<OpCase, BackendUnderTest>;

inline std::string op_param_name(const ::testing::TestParamInfo<OpParam>& info) {
  return std::get<1>(info.param).name + "_" + std::get<0>(info.param).name;
}

class OpTable : public ::testing::TestWithParam<OpParam> {};

TEST_P(OpTable, MatchesNaive) {
  const OpCase& c = std::get<0>(GetParam());
  const BackendUnderTest& target = std::get<1>(GetParam());
  std::string why;
  const std::shared_ptr<Backend> be = target.acquire(&why);
  if (!be) GTEST_SKIP() << why;
  const DType act = c.storage == Storage::Compute ? be->compute_dtype() : DType::F32;
  const double bound = be->compute_dtype() == DType::F32 ? c.bound.f32 : c.bound.lowp;
  SCOPED_TRACE(fmt::format("{} on {}, activations {}, bound {}", c.name, be->name(), dtype_name(act), bound));
  OpContext ctx(*be, act, bound, seed_of(c.name));
  c.run(ctx);
  be->synchronize();
}

}  // namespace lingbot::test::ops
