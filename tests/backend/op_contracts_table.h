// One table of op-contract violations run against every backend: each entry
// is a Backend call that breaks one rule of backend/op_contracts.h and must
// throw lingbot::Error with a one-line message that starts with the op's
// name ("copy_rows: ...") and names what is wrong. Because every backend
// runs the same table, the CPU and the CUDA backend refuse the same set of
// calls. A second, shorter table holds calls at the edges of the contracts
// (exact fits, broadcasts, the aliasing that is allowed) that must be
// accepted.
//
// Include this header from exactly one file per test binary and instantiate
// both suites there with that binary's backends:
//   INSTANTIATE_TEST_SUITE_P(Contracts, OpContractViolation,
//                            Combine(ValuesIn(violations()), Values(backends...)), violation_name);
//   INSTANTIATE_TEST_SUITE_P(Contracts, OpContractEdge,
//                            Combine(ValuesIn(edges()), Values(backends...)), edge_name);
// tests/backend/op_contracts_test.cpp does it for the CPU backend,
// tests/backend/cuda/op_contracts_cuda_test.cpp for the CUDA backend.
//
// Tensors come from Backend::alloc, uninitialised: a refused call never
// reads them. Dtypes that break a rule on every backend: float16 and int32
// activations (float32 and bfloat16 are some backend's activation types).
#pragma once

#include "backend/backend.h"
#include "core/error.h"
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

namespace lingbot::test::contracts {

// What a table entry's call works with.
class Ctx {
 public:
  explicit Ctx(Backend& backend) : be(backend), act(backend.compute_dtype()) {}

  Backend& be;
  const DType act;  // an activation dtype of this backend

  Tensor t(const Shape& s) { return be.alloc(s, act); }
  Tensor t(const Shape& s, DType d) { return be.alloc(s, d); }
  Tensor f32(const Shape& s) { return be.alloc(s, DType::F32); }
  Tensor host(const Shape& s, DType d = DType::F32) { return Tensor::empty(s, d); }
  // A tensor on another device than the backend's: a host tensor for a GPU
  // backend; for the CPU backend, host memory labelled as a CUDA tensor
  // (never read: the check refuses it first).
  Tensor foreign(const Shape& s, DType d = DType::F32) {
    Tensor h = Tensor::empty(s, d);
    if (be.device() != Device::CPU) return h;
    return Tensor::wrap(h.data(), s, d, Device::CUDA, std::shared_ptr<void>(h.data(), [h](void*) {}));
  }
  // A tensor that is not a host tensor (upload's and upload_into's `host`).
  Tensor off_host(const Shape& s, DType d = DType::F32) { return be.device() == Device::CPU ? foreign(s, d) : f32(s); }
};

struct Violation {
  std::string name;    // the test name after the backend: letters, digits, '_'
  std::string op;      // the message starts with "<op>: "
  std::string needle;  // and holds this (the argument or rule at fault)
  std::function<void(Ctx&)> call;
};

struct Edge {
  std::string name;
  std::function<void(Ctx&)> call;
};

inline void PrintTo(const Violation& v, std::ostream* os) { *os << v.name; }
inline void PrintTo(const Edge& e, std::ostream* os) { *os << e.name; }

// ---- the violations ---------------------------------------------------------------

inline std::vector<Violation> make_violations() {
  std::vector<Violation> t;
  const auto add = [&t](std::string name, std::string op, std::string needle, std::function<void(Ctx&)> call) {
    t.push_back({std::move(name), std::move(op), std::move(needle), std::move(call)});
  };
  constexpr DType F16 = DType::F16, BF16 = DType::BF16, I32 = DType::I32;

  // ---- memory: upload, upload_into, download, download_async, fill, convert ----
  add("upload_from_the_device", "upload", "host", [](Ctx& c) { c.be.upload(c.off_host({4}), DType::F32); });
  add("upload_unallocated", "upload", "not allocated", [](Ctx& c) { c.be.upload(Tensor(), DType::F32); });
  add("upload_into_other_shape", "upload_into", "shape", [](Ctx& c) {
    Tensor d = c.f32({4, 3});
    c.be.upload_into(c.host({3, 4}), d);
  });
  add("upload_into_from_the_device", "upload_into", "host", [](Ctx& c) {
    Tensor d = c.f32({3, 4});
    c.be.upload_into(c.off_host({3, 4}), d);
  });
  add("upload_into_foreign_device", "upload_into", "not on", [](Ctx& c) {
    Tensor d = c.foreign({3, 4});
    c.be.upload_into(c.host({3, 4}), d);
  });
  add("upload_once_into_other_shape", "upload_into", "shape", [](Ctx& c) {
    Tensor d = c.f32({4, 3});
    c.be.upload_once_into(c.host({3, 4}), d);
  });
  add("upload_once_into_from_the_device", "upload_into", "host", [](Ctx& c) {
    Tensor d = c.f32({3, 4});
    c.be.upload_once_into(c.off_host({3, 4}), d);
  });
  add("download_foreign", "download", "not on", [](Ctx& c) { c.be.download(c.foreign({4})); });
  add("download_unallocated", "download", "not allocated", [](Ctx& c) { c.be.download(Tensor()); });
  add("download_async_other_shape", "download_async", "host", [](Ctx& c) {
    Tensor h = c.be.alloc_host({5}, DType::F32);
    c.be.download_async(c.f32({4}), h);
  });
  add("download_async_other_dtype", "download_async", "host", [](Ctx& c) {
    Tensor h = c.host({4}, F16);
    c.be.download_async(c.f32({4}), h);
  });
  add("download_async_into_the_device", "download_async", "host", [](Ctx& c) {
    Tensor h = c.off_host({4});
    c.be.download_async(c.f32({4}), h);
  });
  add("fill_int32", "fill", "float", [](Ctx& c) {
    Tensor x = c.t({4}, I32);
    c.be.fill(x, 1.0f);
  });
  add("fill_foreign", "fill", "not on", [](Ctx& c) {
    Tensor x = c.foreign({4});
    c.be.fill(x, 1.0f);
  });
  add("fill_unallocated", "fill", "not allocated", [](Ctx& c) {
    Tensor x;
    c.be.fill(x, 1.0f);
  });
  add("convert_other_count", "convert", "element count", [](Ctx& c) {
    Tensor d = c.f32({5});
    c.be.convert(c.f32({4}), d);
  });
  add("convert_to_int32", "convert", "dst", [](Ctx& c) {
    Tensor d = c.t({4}, I32);
    c.be.convert(c.f32({4}), d);
  });
  add("convert_foreign", "convert", "not on", [](Ctx& c) {
    Tensor d = c.f32({4});
    c.be.convert(c.foreign({4}), d);
  });

  // ---- linear, linear_residual: x[4, 8] w[6, 8] b[6] -> out[4, 6] ----
  struct Dense {
    Ctx& c;
    Tensor x = c.t({4, 8}), w = c.t({6, 8}), b = c.f32({6}), out = c.t({4, 6});
    void run() { c.be.linear(x, w, &b, out); }
    void residual(const Tensor* gamma) { c.be.linear_residual(x, w, &b, gamma, out); }
  };
  add("linear_x_not_rows_of_k", "linear", "K = 8", [](Ctx& c) {
    Dense d{c};
    d.x = c.t({4, 7});
    d.run();
  });
  add("linear_weight_not_a_matrix", "linear", "not a matrix", [](Ctx& c) {
    Dense d{c};
    d.w = c.t({6, 8, 1});
    d.run();
  });
  add("linear_out_wrong_size", "linear", "out", [](Ctx& c) {
    Dense d{c};
    d.out = c.t({4, 5});
    d.run();
  });
  add("linear_bias_wrong_length", "linear", "bias", [](Ctx& c) {
    Dense d{c};
    d.b = c.f32({5});
    d.run();
  });
  add("linear_bias_not_float32", "linear", "bias", [](Ctx& c) {
    Dense d{c};
    d.b = c.t({6}, F16);
    d.run();
  });
  add("linear_weight_dtype_differs", "linear", "weight", [](Ctx& c) {
    Dense d{c};
    d.w = c.t({6, 8}, F16);
    d.run();
  });
  add("linear_x_int32", "linear", "x", [](Ctx& c) {
    Dense d{c};
    d.x = c.t({4, 8}, I32);
    d.w = c.t({6, 8}, I32);
    d.run();
  });
  add("linear_out_float16", "linear", "out", [](Ctx& c) {
    Dense d{c};
    d.out = c.t({4, 6}, F16);
    d.run();
  });
  add("linear_x_foreign", "linear", "not on", [](Ctx& c) {
    Dense d{c};
    d.x = c.foreign({4, 8}, c.act);
    d.run();
  });
  add("linear_out_unallocated", "linear", "not allocated", [](Ctx& c) {
    Dense d{c};
    d.out = Tensor();
    d.run();
  });
  add("linear_out_overlaps_x", "linear", "overlaps", [](Ctx& c) {
    Dense d{c};
    d.out = d.x.reshape({32}).slice(0, 24).reshape({4, 6});
    d.run();
  });
  add("linear_residual_gamma_wrong_length", "linear_residual", "gamma", [](Ctx& c) {
    Dense d{c};
    const Tensor g = c.f32({7});
    d.residual(&g);
  });
  add("linear_residual_residual_wrong_size", "linear_residual", "residual", [](Ctx& c) {
    Dense d{c};
    d.out = c.t({4, 7});
    d.residual(nullptr);
  });
  add("linear_residual_residual_int32", "linear_residual", "residual", [](Ctx& c) {
    Dense d{c};
    d.out = c.t({4, 6}, I32);
    d.residual(nullptr);
  });
  add("linear_residual_overlaps_x", "linear_residual", "overlaps", [](Ctx& c) {
    Dense d{c};
    d.out = d.x.reshape({32}).slice(8, 24).reshape({4, 6});
    d.residual(nullptr);
  });
  add("linear_residual_weight_foreign", "linear_residual", "not on", [](Ctx& c) {
    Dense d{c};
    d.w = c.foreign({6, 8}, c.act);
    d.residual(nullptr);
  });

  // ---- layer_norm: x[5, 8], w, b [8] -> out[5, 8] ----
  struct Norm {
    Ctx& c;
    Tensor x = c.t({5, 8}), w = c.f32({8}), b = c.f32({8}), out = c.t({5, 8});
    void run() { c.be.layer_norm(x, &w, &b, 1e-5f, out); }
  };
  add("layer_norm_weight_does_not_divide_x", "layer_norm", "weight", [](Ctx& c) {
    Norm n{c};
    n.w = c.f32({7});
    n.run();
  });
  add("layer_norm_bias_not_the_weight_length", "layer_norm", "bias", [](Ctx& c) {
    Norm n{c};
    n.b = c.f32({9});
    n.run();
  });
  add("layer_norm_weight_not_float32", "layer_norm", "weight", [](Ctx& c) {
    Norm n{c};
    n.w = c.t({8}, F16);
    n.run();
  });
  add("layer_norm_out_wrong_size", "layer_norm", "out", [](Ctx& c) {
    Norm n{c};
    n.out = c.t({5, 7});
    n.run();
  });
  add("layer_norm_scalar", "layer_norm", "scalar", [](Ctx& c) {
    Norm n{c};
    n.x = c.t({});
    n.out = c.t({});
    c.be.layer_norm(n.x, nullptr, nullptr, 1e-5f, n.out);
  });
  add("layer_norm_out_overlaps_part_of_x", "layer_norm", "overlaps part", [](Ctx& c) {
    Norm n{c};
    const Tensor buffer = c.t({6, 8});
    n.x = buffer.slice(0, 5);
    n.out = buffer.slice(1, 5);
    n.run();
  });
  add("layer_norm_x_float16", "layer_norm", "x", [](Ctx& c) {
    Norm n{c};
    n.x = c.t({5, 8}, F16);
    n.run();
  });
  add("layer_norm_out_foreign", "layer_norm", "not on", [](Ctx& c) {
    Norm n{c};
    n.out = c.foreign({5, 8}, c.act);
    n.run();
  });

  // ---- split_qkv: qkv[4, 3 * 2 * 8] -> q, k, v [4, 16], 2 heads of 8 ----
  struct Qkv {
    Ctx& c;
    int heads = 2, head_dim = 8;
    Tensor qkv = c.t({4, 48}), q = c.t({4, 16}), k = c.t({4, 16}), v = c.t({4, 16});
    Tensor nw = c.f32({8}), cos = c.f32({4, 4}), sin = c.f32({4, 4});
    RopeTable::Pairs pairs = RopeTable::Pairs::HalfSplit;
    void run(bool norm = false, bool rope = false) {
      const QkNorm n{&nw, nullptr, &nw, nullptr, 1e-5f};
      const RopeTable r{cos, sin, pairs};
      c.be.split_qkv(qkv, heads, head_dim, norm ? &n : nullptr, rope ? &r : nullptr, q, k, v);
    }
  };
  add("split_qkv_qkv_not_rows", "split_qkv", "qkv", [](Ctx& c) {
    Qkv s{c};
    s.qkv = c.t({4, 47});
    s.run();
  });
  add("split_qkv_no_heads", "split_qkv", "heads", [](Ctx& c) {
    Qkv s{c};
    s.heads = 0;
    s.run();
  });
  add("split_qkv_q_wrong_size", "split_qkv", "q", [](Ctx& c) {
    Qkv s{c};
    s.q = c.t({4, 15});
    s.run();
  });
  add("split_qkv_v_dtype_differs", "split_qkv", "v", [](Ctx& c) {
    Qkv s{c};
    s.v = c.t({4, 16}, F16);
    s.run();
  });
  add("split_qkv_norm_weight_wrong_length", "split_qkv", "q_norm weight", [](Ctx& c) {
    Qkv s{c};
    s.nw = c.f32({7});
    s.run(true);
  });
  add("split_qkv_rope_wrong_width", "split_qkv", "rope", [](Ctx& c) {
    Qkv s{c};
    s.cos = c.f32({4, 3});
    s.sin = c.f32({4, 3});
    s.run(false, true);
  });
  add("split_qkv_rope_sin_differs", "split_qkv", "rope", [](Ctx& c) {
    Qkv s{c};
    s.sin = c.f32({3, 4});
    s.run(false, true);
  });
  add("split_qkv_rope_not_float32", "split_qkv", "rope cos", [](Ctx& c) {
    Qkv s{c};
    s.cos = c.t({4, 4}, F16);
    s.run(false, true);
  });
  add("split_qkv_half_split_head_dim_6", "split_qkv", "divisible by 4", [](Ctx& c) {
    Qkv s{c};
    s.head_dim = 6;
    s.qkv = c.t({4, 36});
    s.q = c.t({4, 12});
    s.k = c.t({4, 12});
    s.v = c.t({4, 12});
    s.cos = c.f32({4, 3});
    s.sin = c.f32({4, 3});
    s.run(false, true);
  });
  add("split_qkv_k_is_q", "split_qkv", "overlaps", [](Ctx& c) {
    Qkv s{c};
    s.k = s.q;
    s.run();
  });
  add("split_qkv_q_overlaps_qkv", "split_qkv", "overlaps", [](Ctx& c) {
    Qkv s{c};
    s.q = s.qkv.reshape({192}).slice(0, 64).reshape({4, 16});
    s.run();
  });

  // ---- attention: q, k, v, out [2 groups x 3 tokens, 2 heads x 4] ----
  struct Attn {
    Ctx& c;
    int groups = 2, heads = 2, head_dim = 4;
    Tensor q = c.t({6, 8}), k = c.t({6, 8}), v = c.t({6, 8}), out = c.t({6, 8});
    void run() { c.be.attention(q, k, v, groups, heads, head_dim, out); }
  };
  add("attention_groups_do_not_divide", "attention", "groups", [](Ctx& c) {
    Attn a{c};
    a.groups = 4;
    a.run();
  });
  add("attention_no_groups", "attention", "groups", [](Ctx& c) {
    Attn a{c};
    a.groups = 0;
    a.run();
  });
  add("attention_no_head_dim", "attention", "dimension 0", [](Ctx& c) {
    Attn a{c};
    a.head_dim = 0;
    a.run();
  });
  add("attention_k_wrong_size", "attention", "differ in size", [](Ctx& c) {
    Attn a{c};
    a.k = c.t({5, 8});
    a.run();
  });
  add("attention_v_dtype_differs", "attention", "v", [](Ctx& c) {
    Attn a{c};
    a.v = c.t({6, 8}, F16);
    a.run();
  });
  add("attention_out_is_q", "attention", "overlaps", [](Ctx& c) {
    Attn a{c};
    a.out = a.q;
    a.run();
  });
  add("attention_out_foreign", "attention", "not on", [](Ctx& c) {
    Attn a{c};
    a.out = c.foreign({6, 8}, c.act);
    a.run();
  });

  // ---- copy_rows: src[10, 4] -> dst[8, 4] ----
  struct Rows {
    Ctx& c;
    Tensor src = c.t({10, 4}), dst = c.t({8, 4});
    void run(const RowCopy& r) { c.be.copy_rows(src, dst, r); }
  };
  const auto rows = [&add](std::string name, std::string needle, RowCopy r) {
    add("copy_rows_" + name, "copy_rows", std::move(needle), [r](Ctx& c) { Rows{c}.run(r); });
  };
  rows("src_past_end", "src rows [8, 11) past src's 10 rows", {1, 3, 4, 8, 0, 0, 0});
  rows("last_src_block_past_end", "block 2 of 3: src rows [8, 11) past src's 10 rows", {3, 3, 4, 0, 4, 0, 3});
  rows("dst_past_end", "dst rows [6, 9) past dst's 8 rows", {1, 3, 4, 0, 0, 6, 0});
  rows("last_dst_block_past_end", "block 1 of 2: dst rows [6, 9) past dst's 8 rows", {2, 3, 4, 0, 3, 0, 6});
  rows("negative_src_offset", "negative src_offset -1", {1, 2, 4, -1, 0, 0, 0});
  rows("negative_dst_offset", "negative dst_offset -2", {1, 2, 4, 0, 0, -2, 0});
  rows("negative_rows", "negative rows -1", {1, -1, 4, 0, 0, 0, 0});
  rows("negative_batches", "negative batches -1", {-1, 2, 4, 0, 0, 0, 0});
  rows("negative_stride_before_src", "block 1 of 2: src rows [-2, 0) before src's first row", {2, 2, 4, 1, -3, 0, 2});
  rows("zero_dst_stride", "dst blocks", {3, 2, 4, 0, 2, 0, 0});
  rows("dst_stride_below_rows", "dst blocks", {2, 3, 4, 0, 3, 0, 2});
  rows("cols_do_not_divide_src", "src", {1, 2, 3, 0, 0, 0, 0});
  rows("no_cols", "rows of 0", {1, 2, 0, 0, 0, 0, 0});
  rows("offset_overflows", "overflows", {3, 1, 4, 0, std::numeric_limits<int64_t>::max() / 2 + 1, 0, 1});
  add("copy_rows_cols_do_not_divide_dst", "copy_rows", "dst", [](Ctx& c) {
    Rows r{c};
    r.dst = c.t({5, 5});
    r.run({1, 2, 4, 0, 0, 0, 0});
  });
  add("copy_rows_dtype_differs", "copy_rows", "dtype", [](Ctx& c) {
    Rows r{c};
    r.dst = c.t({8, 4}, F16);
    r.run({1, 2, 4, 0, 0, 0, 0});
  });
  add("copy_rows_src_foreign", "copy_rows", "not on", [](Ctx& c) {
    Rows r{c};
    r.src = c.foreign({10, 4}, c.act);
    r.run({1, 2, 4, 0, 0, 0, 0});
  });
  add("copy_rows_dst_unallocated", "copy_rows", "not allocated", [](Ctx& c) {
    Rows r{c};
    r.dst = Tensor();
    r.run({1, 2, 4, 0, 0, 0, 0});
  });
  add("copy_rows_src_and_dst_rows_overlap", "copy_rows", "overlap in memory", [](Ctx& c) {
    Rows r{c};
    r.dst = r.src;
    r.run({1, 4, 4, 0, 0, 2, 0});
  });

  // ---- concat_cols: a[3, 4] | b[3, 5] -> out[3, 9] ----
  struct Concat {
    Ctx& c;
    Tensor a = c.t({3, 4}), b = c.t({3, 5}), out = c.t({3, 9});
    void run() { c.be.concat_cols(a, b, out); }
  };
  add("concat_cols_rows_differ", "concat_cols", "rows", [](Ctx& c) {
    Concat k{c};
    k.b = c.t({2, 5});
    k.run();
  });
  add("concat_cols_out_wrong_size", "concat_cols", "out", [](Ctx& c) {
    Concat k{c};
    k.out = c.t({3, 8});
    k.run();
  });
  add("concat_cols_b_dtype_differs", "concat_cols", "b", [](Ctx& c) {
    Concat k{c};
    k.b = c.t({3, 5}, F16);
    k.run();
  });
  add("concat_cols_out_overlaps_a", "concat_cols", "overlaps", [](Ctx& c) {
    Concat k{c};
    k.a = k.out.reshape({27}).slice(0, 12).reshape({3, 4});
    k.run();
  });
  add("concat_cols_scalar", "concat_cols", "scalar", [](Ctx& c) {
    Concat k{c};
    k.a = c.t({});
    k.run();
  });

  // ---- add_broadcast: x[4, 6] += y[6] ----
  struct Broadcast {
    Ctx& c;
    Tensor x = c.t({4, 6}), y = c.t({6});
    void run() { c.be.add_broadcast(x, y); }
  };
  add("add_broadcast_y_does_not_repeat", "add_broadcast", "repeat", [](Ctx& c) {
    Broadcast b{c};
    b.y = c.t({5});
    b.run();
  });
  add("add_broadcast_y_empty", "add_broadcast", "repeat", [](Ctx& c) {
    Broadcast b{c};
    b.y = c.t({0});
    b.run();
  });
  add("add_broadcast_y_float16", "add_broadcast", "y", [](Ctx& c) {
    Broadcast b{c};
    b.y = c.t({6}, F16);
    b.run();
  });
  add("add_broadcast_x_int32", "add_broadcast", "x", [](Ctx& c) {
    Broadcast b{c};
    b.x = c.t({4, 6}, I32);
    b.run();
  });
  add("add_broadcast_y_inside_x", "add_broadcast", "overlaps", [](Ctx& c) {
    Broadcast b{c};
    b.y = b.x.reshape({24}).slice(6, 6);
    b.run();
  });
  add("add_broadcast_y_foreign", "add_broadcast", "not on", [](Ctx& c) {
    Broadcast b{c};
    b.y = c.foreign({6}, c.act);
    b.run();
  });

  // ---- add, relu, silu: [5, 3] ----
  add("add_sizes_differ", "add", "differ in size", [](Ctx& c) {
    Tensor out = c.t({5, 3});
    c.be.add(c.t({5, 3}), c.t({5, 2}), out);
  });
  add("add_out_dtype_differs", "add", "out", [](Ctx& c) {
    Tensor out = c.t({5, 3}, F16);
    c.be.add(c.t({5, 3}), c.t({5, 3}), out);
  });
  add("add_out_overlaps_part_of_a", "add", "overlaps part", [](Ctx& c) {
    const Tensor buffer = c.t({6, 3});
    Tensor out = buffer.slice(1, 5);
    c.be.add(buffer.slice(0, 5), c.t({5, 3}), out);
  });
  add("add_a_foreign", "add", "not on", [](Ctx& c) {
    Tensor out = c.t({5, 3});
    c.be.add(c.foreign({5, 3}, c.act), c.t({5, 3}), out);
  });
  for (const char* op : {"relu", "silu"}) {
    const std::string o(op);
    const auto call = [o](Backend& be, const Tensor& x, Tensor& out) {
      if (o == "relu")
        be.relu(x, out);
      else
        be.silu(x, out);
    };
    add(o + "_sizes_differ", o, "size", [call](Ctx& c) {
      Tensor out = c.t({5, 2});
      call(c.be, c.t({5, 3}), out);
    });
    add(o + "_out_dtype_differs", o, "out", [call](Ctx& c) {
      Tensor out = c.t({5, 3}, F16);
      call(c.be, c.t({5, 3}), out);
    });
    add(o + "_out_overlaps_part_of_x", o, "overlaps part", [call](Ctx& c) {
      const Tensor buffer = c.t({16});
      Tensor out = buffer.slice(1, 15);
      call(c.be, buffer.slice(0, 15), out);
    });
    add(o + "_int32", o, "x", [call](Ctx& c) {
      Tensor out = c.t({5, 3}, I32);
      call(c.be, c.t({5, 3}, I32), out);
    });
  }

  // ---- adaln_modulate: xn[4, 6], mod[4, 18], residual[4, 6] -> out[4, 6] ----
  struct Adaln {
    Ctx& c;
    Tensor xn = c.t({4, 6}), mod = c.t({4, 18}), residual = c.t({4, 6}), out = c.t({4, 6});
    void run() { c.be.adaln_modulate(xn, mod, residual, out); }
  };
  add("adaln_modulate_mod_wrong_size", "adaln_modulate", "mod", [](Ctx& c) {
    Adaln a{c};
    a.mod = c.t({4, 12});
    a.run();
  });
  add("adaln_modulate_residual_wrong_size", "adaln_modulate", "residual", [](Ctx& c) {
    Adaln a{c};
    a.residual = c.t({4, 5});
    a.run();
  });
  add("adaln_modulate_mod_dtype_differs", "adaln_modulate", "mod", [](Ctx& c) {
    Adaln a{c};
    a.mod = c.t({4, 18}, F16);
    a.run();
  });
  add("adaln_modulate_out_is_residual", "adaln_modulate", "overlaps", [](Ctx& c) {
    Adaln a{c};
    a.out = a.residual;
    a.run();
  });

  // ---- patchify: images[2, 3, 8, 12], patch 4 -> patches[2 * 2 * 3, 48] ----
  struct Patches {
    Ctx& c;
    int patch = 4;
    Tensor images = c.f32({2, 3, 8, 12}), patches = c.t({12, 48});
    void run() { c.be.patchify(images, patch, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}, patches); }
  };
  add("patchify_not_rgb", "patchify", "RGB", [](Ctx& c) {
    Patches p{c};
    p.images = c.f32({2, 4, 8, 12});
    p.run();
  });
  add("patchify_patch_does_not_divide", "patchify", "patches", [](Ctx& c) {
    Patches p{c};
    p.patch = 5;
    p.run();
  });
  add("patchify_no_patch", "patchify", "patch size 0", [](Ctx& c) {
    Patches p{c};
    p.patch = 0;
    p.run();
  });
  add("patchify_images_float16", "patchify", "images", [](Ctx& c) {
    Patches p{c};
    p.images = c.t({2, 3, 8, 12}, F16);
    p.run();
  });
  add("patchify_images_not_nchw", "patchify", "NCHW", [](Ctx& c) {
    Patches p{c};
    p.images = c.f32({3, 8, 12});
    p.run();
  });
  add("patchify_patches_wrong_size", "patchify", "patches", [](Ctx& c) {
    Patches p{c};
    p.patches = c.t({12, 47});
    p.run();
  });
  add("patchify_patches_int32", "patchify", "patches", [](Ctx& c) {
    Patches p{c};
    p.patches = c.t({12, 48}, I32);
    p.run();
  });

  // ---- tokens_to_nchw: tokens[2, 2 x 3, 5] -> maps[2, 5, 2, 3] ----
  struct Maps {
    Ctx& c;
    int h = 2, w = 3;
    Tensor tokens = c.t({2, 6, 5}), maps = c.t({2, 5, 2, 3});
    void run() { c.be.tokens_to_nchw(tokens, h, w, maps); }
  };
  add("tokens_to_nchw_maps_transposed", "tokens_to_nchw", "maps", [](Ctx& c) {
    Maps m{c};
    m.maps = c.t({2, 5, 3, 2});
    m.run();
  });
  add("tokens_to_nchw_tokens_not_whole_maps", "tokens_to_nchw", "are not [B, 4x4, C]", [](Ctx& c) {
    Maps m{c};
    m.h = 4;
    m.w = 4;
    m.run();
  });
  add("tokens_to_nchw_no_height", "tokens_to_nchw", "are not [B, 0x3, C]", [](Ctx& c) {
    Maps m{c};
    m.h = 0;
    m.run();
  });
  add("tokens_to_nchw_maps_dtype_differs", "tokens_to_nchw", "maps", [](Ctx& c) {
    Maps m{c};
    m.maps = c.t({2, 5, 2, 3}, F16);
    m.run();
  });
  add("tokens_to_nchw_maps_overlap_tokens", "tokens_to_nchw", "overlaps", [](Ctx& c) {
    Maps m{c};
    m.maps = m.tokens.reshape({2, 5, 2, 3});
    m.run();
  });

  // ---- conv2d: x[1, 2, 5, 5], w[3, 2, 3, 3], b[3], stride 1, pad 1 -> out[1, 3, 5, 5] ----
  struct Conv {
    Ctx& c;
    int stride = 1, pad = 1;
    Tensor x = c.f32({1, 2, 5, 5}), w = c.f32({3, 2, 3, 3}), b = c.f32({3}), out = c.f32({1, 3, 5, 5});
    void run() { c.be.conv2d(x, w, &b, stride, pad, out); }
  };
  add("conv2d_weight_in_channels", "conv2d", "weight", [](Ctx& c) {
    Conv k{c};
    k.w = c.f32({3, 4, 3, 3});
    k.run();
  });
  add("conv2d_weight_not_square", "conv2d", "weight", [](Ctx& c) {
    Conv k{c};
    k.w = c.f32({3, 2, 3, 2});
    k.run();
  });
  add("conv2d_out_wrong_size", "conv2d", "out", [](Ctx& c) {
    Conv k{c};
    k.out = c.f32({1, 3, 4, 5});
    k.run();
  });
  add("conv2d_no_stride", "conv2d", "stride", [](Ctx& c) {
    Conv k{c};
    k.stride = 0;
    k.run();
  });
  add("conv2d_negative_padding", "conv2d", "padding", [](Ctx& c) {
    Conv k{c};
    k.pad = -1;
    k.run();
  });
  add("conv2d_bias_wrong_length", "conv2d", "bias", [](Ctx& c) {
    Conv k{c};
    k.b = c.f32({2});
    k.run();
  });
  add("conv2d_kernel_larger_than_input", "conv2d", "larger", [](Ctx& c) {
    Conv k{c};
    k.x = c.f32({1, 2, 1, 1});
    k.pad = 0;
    k.out = c.f32({1, 3, 1, 1});
    k.run();
  });
  add("conv2d_x_float16", "conv2d", "x", [](Ctx& c) {
    Conv k{c};
    k.x = c.t({1, 2, 5, 5}, F16);
    k.run();
  });
  add("conv2d_out_is_x", "conv2d", "overlaps", [](Ctx& c) {
    Conv k{c};
    k.x = c.f32({1, 3, 5, 5});
    k.w = c.f32({3, 3, 3, 3});
    k.out = k.x;
    k.run();
  });
  add("conv2d_weight_foreign", "conv2d", "not on", [](Ctx& c) {
    Conv k{c};
    k.w = c.foreign({3, 2, 3, 3});
    k.run();
  });

  // ---- conv_transpose2d: x[1, 2, 3, 3], w[2, 4, 2, 2], b[4], k 2 -> out[1, 4, 6, 6] ----
  struct Up {
    Ctx& c;
    int k = 2;
    Tensor x = c.f32({1, 2, 3, 3}), w = c.f32({2, 4, 2, 2}), b = c.f32({4}), out = c.f32({1, 4, 6, 6});
    void run() { c.be.conv_transpose2d(x, w, &b, k, out); }
  };
  add("conv_transpose2d_kernel_not_the_weight", "conv_transpose2d", "weight", [](Ctx& c) {
    Up u{c};
    u.k = 3;
    u.out = c.f32({1, 4, 9, 9});
    u.run();
  });
  add("conv_transpose2d_no_kernel", "conv_transpose2d", "kernel", [](Ctx& c) {
    Up u{c};
    u.k = 0;
    u.run();
  });
  add("conv_transpose2d_out_wrong_size", "conv_transpose2d", "out", [](Ctx& c) {
    Up u{c};
    u.out = c.f32({1, 4, 6, 5});
    u.run();
  });
  add("conv_transpose2d_weight_in_channels", "conv_transpose2d", "weight", [](Ctx& c) {
    Up u{c};
    u.w = c.f32({3, 4, 2, 2});
    u.run();
  });
  add("conv_transpose2d_bias_wrong_length", "conv_transpose2d", "bias", [](Ctx& c) {
    Up u{c};
    u.b = c.f32({5});
    u.run();
  });

  // ---- resize_bilinear: x[1, 2, 3, 4] -> out[1, 2, 6, 8] ----
  struct Resize {
    Ctx& c;
    Tensor x = c.f32({1, 2, 3, 4}), out = c.f32({1, 2, 6, 8});
    void run(const Tensor* a = nullptr) { c.be.resize_bilinear(x, a, out); }
  };
  add("resize_bilinear_channels_differ", "resize_bilinear", "channels", [](Ctx& c) {
    Resize r{c};
    r.out = c.f32({1, 3, 6, 8});
    r.run();
  });
  add("resize_bilinear_x_has_no_pixels", "resize_bilinear", "no pixels", [](Ctx& c) {
    Resize r{c};
    r.x = c.f32({1, 2, 0, 4});
    r.run();
  });
  add("resize_bilinear_add_axes_uncovered_channels", "resize_bilinear_add_axes", "channels", [](Ctx& c) {
    Resize r{c};
    c.be.resize_bilinear_add_axes(r.x, c.f32({1, 8}), c.f32({2, 6}), r.out);
  });
  add("resize_bilinear_add_axes_by_col_wrong_width", "resize_bilinear_add_axes", "by_col", [](Ctx& c) {
    Resize r{c};
    c.be.resize_bilinear_add_axes(r.x, c.f32({1, 7}), c.f32({1, 6}), r.out);
  });
  add("resize_bilinear_add_axes_by_row_float16", "resize_bilinear_add_axes", "by_row", [](Ctx& c) {
    Resize r{c};
    c.be.resize_bilinear_add_axes(r.x, c.f32({1, 8}), c.t({1, 6}, F16), r.out);
  });
  add("resize_bilinear_add_not_whole_planes", "resize_bilinear", "add", [](Ctx& c) {
    Resize r{c};
    const Tensor a = c.f32({5});
    r.run(&a);
  });
  add("resize_bilinear_add_float16", "resize_bilinear", "add", [](Ctx& c) {
    Resize r{c};
    const Tensor a = c.t({2, 6, 8}, F16);
    r.run(&a);
  });
  add("resize_bilinear_add_foreign", "resize_bilinear", "not on", [](Ctx& c) {
    Resize r{c};
    const Tensor a = c.foreign({2, 6, 8});
    r.run(&a);
  });
  add("resize_bilinear_out_is_x", "resize_bilinear", "overlaps", [](Ctx& c) {
    Resize r{c};
    r.out = r.x;
    r.run();
  });
  add("resize_bilinear_out_not_nchw", "resize_bilinear", "NCHW", [](Ctx& c) {
    Resize r{c};
    r.out = c.f32({2, 6, 8});
    r.run();
  });

  // ---- the channels-last ops: the same checks on [n, h, w, c] ----
  // conv2d_nhwc: x[1, 5, 5, 2], w[3, 3, 3, 2], b[3], stride 1, pad 1 -> out[1, 5, 5, 3]
  struct ConvNhwc {
    Ctx& c;
    Tensor x = c.f32({1, 5, 5, 2}), w = c.f32({3, 3, 3, 2}), b = c.f32({3}), out = c.f32({1, 5, 5, 3});
    ConvEpilogue e;
    void run() { c.be.conv2d_nhwc(x, w, &b, 1, 1, out, e); }
  };
  add("conv2d_nhwc_weight_channels_first", "conv2d_nhwc", "is not [3, k, k, 2]", [](Ctx& c) {
    ConvNhwc k{c};
    k.w = c.f32({3, 2, 3, 3});
    k.run();
  });
  add("conv2d_nhwc_out_channels_first", "conv2d_nhwc", "out", [](Ctx& c) {
    ConvNhwc k{c};
    k.out = c.f32({1, 3, 5, 5});
    k.run();
  });
  add("conv2d_nhwc_residual_wrong_shape", "conv2d_nhwc", "residual", [](Ctx& c) {
    ConvNhwc k{c};
    const Tensor r = c.f32({1, 5, 5, 2});
    k.e.residual = &r;
    k.run();
  });
  add("conv2d_nhwc_residual_is_out", "conv2d_nhwc", "overlaps", [](Ctx& c) {
    ConvNhwc k{c};
    k.e.residual = &k.out;
    k.run();
  });
  add("conv2d_nhwc_residual_float16", "conv2d_nhwc", "residual", [](Ctx& c) {
    ConvNhwc k{c};
    const Tensor r = c.t({1, 5, 5, 3}, F16);
    k.e.residual = &r;
    k.run();
  });
  add("conv2d_nhwc_out_not_4d", "conv2d_nhwc", "NHWC", [](Ctx& c) {
    ConvNhwc k{c};
    k.out = c.f32({5, 5, 3});
    k.run();
  });
  // The maps and weights of one op share a dtype (float32, or bfloat16 where
  // the backend computes in it); the bias stays float32.
  add("conv2d_nhwc_weight_float32_for_bfloat16_maps", "conv2d_nhwc", "bfloat16", [](Ctx& c) {
    ConvNhwc k{c};
    k.x = c.t({1, 5, 5, 2}, BF16);
    k.out = c.t({1, 5, 5, 3}, BF16);
    k.run();
  });
  add("conv2d_nhwc_bias_bfloat16", "conv2d_nhwc", "bias", [](Ctx& c) {
    ConvNhwc k{c};
    k.b = c.t({3}, BF16);
    k.run();
  });
  add("resize_bilinear_nhwc_float16_maps", "resize_bilinear_nhwc", "x", [](Ctx& c) {
    Tensor out = c.t({1, 6, 8, 2}, F16);
    c.be.resize_bilinear_nhwc(c.t({1, 3, 4, 2}, F16), nullptr, out);
  });
  // conv_transpose2d_nhwc: x[1, 3, 3, 2], w[2, 4, 2, 2], k 2 -> out[1, 6, 6, 4]
  add("conv_transpose2d_nhwc_out_wrong_size", "conv_transpose2d_nhwc", "is not [1, 6, 6, 4]", [](Ctx& c) {
    Tensor out = c.f32({1, 6, 4, 4});
    c.be.conv_transpose2d_nhwc(c.f32({1, 3, 3, 2}), c.f32({2, 4, 2, 2}), nullptr, 2, out);
  });
  add("conv_transpose2d_nhwc_weight_in_channels", "conv_transpose2d_nhwc", "weight", [](Ctx& c) {
    Tensor out = c.f32({1, 6, 6, 4});
    c.be.conv_transpose2d_nhwc(c.f32({1, 3, 3, 2}), c.f32({3, 4, 2, 2}), nullptr, 2, out);
  });
  // resize_bilinear_nhwc: x[1, 3, 4, 2] -> out[1, 6, 8, 2]
  add("resize_bilinear_nhwc_channels_differ", "resize_bilinear_nhwc", "channels", [](Ctx& c) {
    Tensor out = c.f32({1, 6, 8, 3});
    c.be.resize_bilinear_nhwc(c.f32({1, 3, 4, 2}), nullptr, out);
  });
  add("resize_bilinear_nhwc_add_a_plane", "resize_bilinear_nhwc", "[H, W, C] maps", [](Ctx& c) {
    Tensor out = c.f32({1, 6, 8, 2});
    const Tensor a = c.f32({6, 8});  // a channels-first plane is not a channels-last map
    c.be.resize_bilinear_nhwc(c.f32({1, 3, 4, 2}), &a, out);
  });
  add("resize_bilinear_add_axes_nhwc_by_col_wrong_width", "resize_bilinear_add_axes_nhwc", "by_col", [](Ctx& c) {
    Tensor out = c.f32({1, 6, 8, 2});
    c.be.resize_bilinear_add_axes_nhwc(c.f32({1, 3, 4, 2}), c.f32({1, 6}), c.f32({1, 6}), out);
  });
  return t;
}

inline const std::vector<Violation>& violations() {
  static const std::vector<Violation> table = make_violations();
  return table;
}

// ---- the edges: valid calls next to the violations above ------------------------

inline std::vector<Edge> make_edges() {
  std::vector<Edge> t;
  const auto rows = [&t](std::string name, Shape src, Shape dst, RowCopy r) {
    t.push_back({"copy_rows_" + name, [=](Ctx& c) {
                   Tensor d = c.t(dst);
                   c.be.copy_rows(c.t(src), d, r);
                 }});
  };
  rows("blocks_to_the_last_row", {10, 4}, {10, 4}, {2, 5, 4, 0, 5, 0, 5});
  rows("zero_src_stride_broadcast", {2, 4}, {9, 4}, {3, 2, 4, 0, 0, 0, 3});
  rows("negative_strides_in_range", {10, 4}, {6, 4}, {3, 2, 4, 6, -3, 4, -2});
  rows("no_batches", {10, 4}, {8, 4}, {0, 5, 4, 0, 0, 0, 0});
  rows("no_rows", {10, 4}, {8, 4}, {3, 0, 4, 0, 0, 0, 0});
  rows("whole_tensor_as_one_column", {2, 3, 4}, {24}, {1, 24, 1, 0, 0, 0, 0});
  t.push_back({"copy_rows_int32", [](Ctx& c) {
                 Tensor d = c.t({8, 4}, DType::I32);
                 c.be.copy_rows(c.t({10, 4}, DType::I32), d, {1, 8, 4, 2, 0, 0, 0});
               }});
  t.push_back({"copy_rows_apart_in_one_tensor", [](Ctx& c) {
                 Tensor x = c.t({10, 4});
                 c.be.copy_rows(x, x, {1, 3, 4, 0, 0, 5, 0});
               }});
  t.push_back({"linear_3d_x", [](Ctx& c) {
                 const Tensor b = c.f32({6});
                 Tensor out = c.t({2, 3, 6});
                 c.be.linear(c.t({2, 3, 8}), c.t({6, 8}), &b, out);
               }});
  t.push_back({"linear_float32_out", [](Ctx& c) {
                 Tensor out = c.f32({4, 6});
                 c.be.linear(c.t({4, 8}), c.t({6, 8}), nullptr, out);
               }});
  t.push_back({"linear_residual_float32_residual", [](Ctx& c) {
                 Tensor residual = c.f32({4, 6});
                 const Tensor g = c.f32({6});
                 c.be.linear_residual(c.t({4, 8}), c.t({6, 8}), nullptr, &g, residual);
               }});
  t.push_back({"layer_norm_in_place", [](Ctx& c) {
                 Tensor x = c.t({5, 8});
                 const Tensor w = c.f32({8});
                 c.be.layer_norm(x, &w, nullptr, 1e-5f, x);
               }});
  t.push_back({"layer_norm_float32_into_activation", [](Ctx& c) {
                 Tensor out = c.t({5, 8});
                 c.be.layer_norm(c.f32({5, 8}), nullptr, nullptr, 1e-5f, out);
               }});
  t.push_back({"concat_cols_flat_out", [](Ctx& c) {
                 Tensor out = c.t({27});
                 c.be.concat_cols(c.t({3, 4}), c.t({3, 5}), out);
               }});
  t.push_back({"tokens_to_nchw_token_matrix", [](Ctx& c) {
                 Tensor maps = c.t({2, 5, 2, 3});
                 c.be.tokens_to_nchw(c.t({12, 5}), 2, 3, maps);
               }});
  t.push_back({"add_out_is_a", [](Ctx& c) {
                 Tensor a = c.t({5, 3});
                 c.be.add(a, c.t({5, 3}), a);
               }});
  t.push_back({"add_all_one_tensor", [](Ctx& c) {
                 Tensor a = c.t({5, 3});
                 c.be.add(a, a, a);
               }});
  t.push_back({"relu_in_place", [](Ctx& c) {
                 Tensor x = c.t({15});
                 c.be.relu(x, x);
               }});
  t.push_back({"silu_in_place", [](Ctx& c) {
                 Tensor x = c.t({15});
                 c.be.silu(x, x);
               }});
  t.push_back({"add_broadcast_float32_y", [](Ctx& c) {
                 Tensor x = c.t({4, 6});
                 c.be.add_broadcast(x, c.f32({2, 3}));
               }});
  t.push_back({"split_qkv_interleaved_head_dim_6", [](Ctx& c) {
                 Tensor q = c.t({4, 12}), k = c.t({4, 12}), v = c.t({4, 12});
                 const RopeTable r{c.f32({1, 3}), c.f32({1, 3}), RopeTable::Pairs::Interleaved};
                 c.be.split_qkv(c.t({4, 36}), 2, 6, nullptr, &r, q, k, v);
               }});
  t.push_back({"conv2d_nhwc_residual_is_x", [](Ctx& c) {
                 Tensor x = c.f32({1, 4, 4, 3}), out = c.f32({1, 4, 4, 3});
                 c.be.conv2d_nhwc(x, c.f32({3, 3, 3, 3}), nullptr, 1, 1, out,
                                  {.act = Activation::Relu, .residual = &x});
               }});
  t.push_back({"conv2d_kernel_fills_the_padded_input", [](Ctx& c) {
                 Tensor out = c.f32({1, 3, 1, 1});
                 c.be.conv2d(c.f32({1, 2, 1, 1}), c.f32({3, 2, 3, 3}), nullptr, 1, 1, out);
               }});
  return t;
}

inline const std::vector<Edge>& edges() {
  static const std::vector<Edge> table = make_edges();
  return table;
}

// ---- backends and the parametrised tests -------------------------------------------

// A backend the tables run on. acquire() gives the backend, or null with
// `why` set when it cannot run here (the test then skips, saying why).
struct BackendUnderTest {
  std::string name;  // the test-name prefix: "Cpu", "Cuda"
  std::function<std::shared_ptr<Backend>(std::string* why)> acquire;
};

inline void PrintTo(const BackendUnderTest& b, std::ostream* os) { *os << b.name; }

using ViolationParam = std::tuple<Violation, BackendUnderTest>;
using EdgeParam = std::tuple<Edge, BackendUnderTest>;

inline std::string violation_name(const ::testing::TestParamInfo<ViolationParam>& info) {
  return std::get<1>(info.param).name + "_" + std::get<0>(info.param).name;
}

inline std::string edge_name(const ::testing::TestParamInfo<EdgeParam>& info) {
  return std::get<1>(info.param).name + "_" + std::get<0>(info.param).name;
}

class OpContractViolation : public ::testing::TestWithParam<ViolationParam> {};
class OpContractEdge : public ::testing::TestWithParam<EdgeParam> {};

TEST_P(OpContractViolation, IsRefusedNamingTheOp) {
  const Violation& v = std::get<0>(GetParam());
  std::string why;
  const std::shared_ptr<Backend> be = std::get<1>(GetParam()).acquire(&why);
  if (!be) GTEST_SKIP() << why;
  Ctx ctx(*be);
  try {
    v.call(ctx);
  } catch (const Error& e) {
    const std::string message = e.what();
    RecordProperty("message", message);  // in --gtest_output=xml reports
    EXPECT_EQ(message.rfind(v.op + ": ", 0), 0u) << "the message does not start with '" << v.op << ": ': " << message;
    EXPECT_NE(message.find(v.needle), std::string::npos) << "the message does not say '" << v.needle << "': " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "the message is not one line: " << message;
    return;
  }
  be->synchronize();
  ADD_FAILURE() << v.name << " was accepted on " << be->name();
}

TEST_P(OpContractEdge, IsAccepted) {
  const Edge& e = std::get<0>(GetParam());
  std::string why;
  const std::shared_ptr<Backend> be = std::get<1>(GetParam()).acquire(&why);
  if (!be) GTEST_SKIP() << why;
  Ctx ctx(*be);
  EXPECT_NO_THROW({
    e.call(ctx);
    be->synchronize();
  });
}

}  // namespace lingbot::test::contracts
