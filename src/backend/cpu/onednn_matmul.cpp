#include "backend/cpu/onednn_matmul.h"

#include "core/error.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <tuple>
#include <unordered_map>

namespace lingbot::cpu {

namespace {

using dnnl::memory;
using Dt = memory::data_type;

// What a primitive depends on: the shape, the operands' type, the bias, the
// activation, the dst, the weights' layout.
using Key = std::tuple<int64_t, int64_t, int64_t, int, bool, int, int, int>;

struct Prepared {
  dnnl::matmul primitive;
  memory::desc src, weights, bias, dst;
  // Packed weights that this shape's primitive cannot read as they are
  // (oneDNN offered no blocked kernel for it): unpacked per call instead.
  bool unpack_weights = false;
};

memory::desc row_major(int64_t rows, int64_t cols, Dt type) { return memory::desc({rows, cols}, type, {cols, 1}); }
Dt onednn_type(DType type) {
  LB_CHECK(type == DType::F32 || type == DType::BF16, "internal error: matmul operands of {}", dtype_name(type));
  return type == DType::BF16 ? Dt::bf16 : Dt::f32;
}
// w[out, in] row-major is the matmul's weights [in, out] with strides (1, in).
memory::desc weights_row_major(int64_t in, int64_t out, Dt type) { return memory::desc({in, out}, type, {1, in}); }

// The rows of the product that chooses the packed layout. oneDNN's blocked
// kernels block the weights by their own dimensions, not by the rows, so any
// count of rows reads the layout chosen here.
constexpr int64_t kLayoutRows = 1024;

bool is_blocked_kernel(const dnnl::matmul::primitive_desc& pd) {
  return std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
}

}  // namespace

struct OnednnMatmuls::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Prepared> prepared;
  // The packed layout of each weight type and shape (in, out), where there is one.
  std::map<std::tuple<Dt, int64_t, int64_t>, std::optional<memory::desc>> layouts;

  const std::optional<memory::desc>& packed_layout(Dt type, int64_t in, int64_t out) {
    const auto shape = std::make_tuple(type, in, out);
    auto it = layouts.find(shape);
    if (it != layouts.end()) return it->second;
    std::optional<memory::desc> layout;
    const memory::desc plain = weights_row_major(in, out, type);
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(row_major(kLayoutRows, in, type), memory::desc({in, out}, type, memory::format_tag::any),
                           row_major(kLayoutRows, out, type)),
        engine);
    const memory::desc chosen = pd.weights_desc();
    if (is_blocked_kernel(pd) && chosen != plain && chosen.get_size() == plain.get_size()) layout = chosen;
    return layouts.emplace(shape, layout).first->second;
  }

  // Weights from the row-major layout into the packed one, or back.
  void move_weights(Dt type, int64_t in, int64_t out, const void* from, bool from_packed, void* to) {
    const std::optional<memory::desc>& packed = packed_layout(type, in, out);
    LB_CHECK(packed.has_value(), "internal error: matmul: no packed layout for w [{}, {}]", out, in);
    const memory::desc plain = weights_row_major(in, out, type);
    try {
      memory src(from_packed ? *packed : plain, engine, const_cast<void*>(from));
      memory dst(from_packed ? plain : *packed, engine, to);
      dnnl::reorder(src, dst).execute(stream, src, dst);
      stream.wait();
    } catch (const dnnl::error& e) {
      fail("weights: oneDNN could not {} w [{}, {}] ({})", from_packed ? "unpack" : "pack", out, in, e.what());
    }
  }

  Prepared& prepare(const MatmulShape& s, Dt type, bool has_bias, Activation act, MatmulDst kind,
                    WeightLayout layout) {
    const Key key{s.rows, s.in, s.out, static_cast<int>(type), has_bias, static_cast<int>(act),
                  static_cast<int>(kind), static_cast<int>(layout)};
    auto it = prepared.find(key);
    if (it != prepared.end()) return it->second;
    Prepared p;
    p.src = row_major(s.rows, s.in, type);
    p.weights = weights_row_major(s.in, s.out, type);
    p.bias = memory::desc({1, s.out}, Dt::f32, {s.out, 1});
    p.dst = row_major(s.rows, s.out, kind == MatmulDst::Bf16 ? Dt::bf16 : Dt::f32);
    dnnl::post_ops ops;
    if (kind == MatmulDst::AddIntoF32) ops.append_sum(1.0f);
    if (act == Activation::Gelu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    if (act == Activation::Relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    auto make = [&](const memory::desc& weights) {
      const auto desc = has_bias ? dnnl::matmul::desc(p.src, weights, p.bias, p.dst)
                                 : dnnl::matmul::desc(p.src, weights, p.dst);
      return dnnl::matmul::primitive_desc(desc, attr, engine);
    };
    if (layout == WeightLayout::Packed) {
      LB_CHECK(packed_layout(type, s.in, s.out).has_value(), "internal error: matmul: no packed layout for w [{}, {}]",
               s.out, s.in);
      std::optional<dnnl::matmul::primitive_desc> pd;
      try {
        pd = make(*packed_layout(type, s.in, s.out));
      } catch (const dnnl::error&) {  // no kernel reads this layout at this shape
      }
      if (pd && is_blocked_kernel(*pd)) {
        p.weights = *packed_layout(type, s.in, s.out);
        p.primitive = dnnl::matmul(*pd);
        return prepared.emplace(key, std::move(p)).first->second;
      }
      p.unpack_weights = true;
    }
    p.primitive = dnnl::matmul(make(p.weights));
    return prepared.emplace(key, std::move(p)).first->second;
  }
};

OnednnMatmuls::OnednnMatmuls() : state_(std::make_unique<State>()) {}
OnednnMatmuls::~OnednnMatmuls() = default;

void OnednnMatmuls::run(const MatmulShape& s, DType operands, const void* x, const void* w, const float* bias,
                        Activation act, MatmulDst kind, void* dst, WeightLayout layout) {
  if (s.rows == 0 || s.out == 0) return;
  LB_CHECK(kind != MatmulDst::AddIntoF32 || act == Activation::None,
           "internal error: matmul: a residual update takes no activation");
  LB_CHECK(layout != WeightLayout::AmxTiles, "internal error: matmul: weights in the AMX tiles' layout");
  const Dt type = onednn_type(operands);
  try {
    State& st = *state_;
    Prepared& p = st.prepare(s, type, bias != nullptr, act, kind, layout);
    thread_local std::vector<std::byte> unpacked;
    if (p.unpack_weights) {
      unpacked.resize(p.weights.get_size());
      st.move_weights(type, s.in, s.out, w, /*from_packed=*/true, unpacked.data());
      w = unpacked.data();
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(p.src, st.engine, const_cast<void*>(x))},
        {DNNL_ARG_WEIGHTS, memory(p.weights, st.engine, const_cast<void*>(w))},
        {DNNL_ARG_DST, memory(p.dst, st.engine, dst)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(p.bias, st.engine, const_cast<float*>(bias)));
    p.primitive.execute(st.stream, args);
    st.stream.wait();
  } catch (const dnnl::error& e) {
    fail("linear ({}): oneDNN failed ({}) on x [{}, {}], w [{}, {}]", dtype_name(operands), e.what(), s.rows, s.in,
         s.out, s.in);
  }
}

bool OnednnMatmuls::packs(DType operands, int64_t in, int64_t out) {
  try {
    return state_->packed_layout(onednn_type(operands), in, out).has_value();
  } catch (const dnnl::error&) {
    return false;
  }
}

void OnednnMatmuls::pack_weights(DType operands, int64_t in, int64_t out, const void* row_major, void* packed) {
  state_->move_weights(onednn_type(operands), in, out, row_major, /*from_packed=*/false, packed);
}

void OnednnMatmuls::unpack_weights(DType operands, int64_t in, int64_t out, const void* packed, void* row_major) {
  state_->move_weights(onednn_type(operands), in, out, packed, /*from_packed=*/true, row_major);
}

std::string bf16_matmul_name() {
  try {
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const int64_t rows = 978, in = 1024, out = 3072;
    const dnnl::matmul::desc desc(row_major(rows, in, Dt::bf16), memory::desc({in, out}, Dt::bf16, {1, in}),
                                  row_major(rows, out, Dt::bf16));
    return dnnl::matmul::primitive_desc(desc, engine).impl_info_str();
  } catch (const dnnl::error& e) {
    return std::string("none (") + e.what() + ")";
  }
}

bool cpu_has_bf16_arithmetic() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool cpu_has_amx_bf16() {
  // oneDNN's own probe (CPUID and the kernel's permission to use the tile
  // registers), not capped by limit_onednn_to, since bf16 needs AVX-512.
  return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
}

}  // namespace lingbot::cpu
