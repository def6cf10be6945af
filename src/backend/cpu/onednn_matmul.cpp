#include "backend/cpu/onednn_matmul.h"

#include "core/error.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <tuple>
#include <unordered_map>

namespace lingbot::cpu {

namespace {

using dnnl::memory;
using Dt = memory::data_type;

// What a primitive depends on: the shape, the bias, the activation, the dst.
using Key = std::tuple<int64_t, int64_t, int64_t, bool, int, int>;

struct Prepared {
  dnnl::matmul primitive;
  memory::desc src, weights, bias, dst;
};

memory::desc row_major(int64_t rows, int64_t cols, Dt type) { return memory::desc({rows, cols}, type, {cols, 1}); }

}  // namespace

struct OnednnMatmuls::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Prepared> prepared;

  Prepared& prepare(const MatmulShape& s, bool has_bias, Activation act, MatmulDst kind) {
    const Key key{s.rows, s.in, s.out, has_bias, static_cast<int>(act), static_cast<int>(kind)};
    auto it = prepared.find(key);
    if (it != prepared.end()) return it->second;
    Prepared p;
    p.src = row_major(s.rows, s.in, Dt::bf16);
    // w[out, in] row-major is the matmul's weights [in, out] with strides (1, in).
    p.weights = memory::desc({s.in, s.out}, Dt::bf16, {1, s.in});
    p.bias = memory::desc({1, s.out}, Dt::f32, {s.out, 1});
    p.dst = row_major(s.rows, s.out, kind == MatmulDst::Bf16 ? Dt::bf16 : Dt::f32);
    dnnl::post_ops ops;
    if (kind == MatmulDst::AddIntoF32) ops.append_sum(1.0f);
    if (act == Activation::Gelu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    if (act == Activation::Relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const auto desc = has_bias ? dnnl::matmul::desc(p.src, p.weights, p.bias, p.dst)
                               : dnnl::matmul::desc(p.src, p.weights, p.dst);
    p.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine));
    return prepared.emplace(key, std::move(p)).first->second;
  }
};

OnednnMatmuls::OnednnMatmuls() : state_(std::make_unique<State>()) {}
OnednnMatmuls::~OnednnMatmuls() = default;

void OnednnMatmuls::run(const MatmulShape& s, const uint16_t* x, const uint16_t* w, const float* bias,
                        Activation act, MatmulDst kind, void* dst) {
  if (s.rows == 0 || s.out == 0) return;
  LB_CHECK(kind != MatmulDst::AddIntoF32 || act == Activation::None,
           "internal error: bf16 matmul: a residual update takes no activation");
  try {
    State& st = *state_;
    Prepared& p = st.prepare(s, bias != nullptr, act, kind);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(p.src, st.engine, const_cast<uint16_t*>(x))},
        {DNNL_ARG_WEIGHTS, memory(p.weights, st.engine, const_cast<uint16_t*>(w))},
        {DNNL_ARG_DST, memory(p.dst, st.engine, dst)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(p.bias, st.engine, const_cast<float*>(bias)));
    p.primitive.execute(st.stream, args);
    st.stream.wait();
  } catch (const dnnl::error& e) {
    fail("linear (bf16): oneDNN failed ({}) on x [{}, {}], w [{}, {}]", e.what(), s.rows, s.in, s.out, s.in);
  }
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
