#include "backend/cpu/onednn_conv.h"

#include "core/error.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <tuple>
#include <vector>

namespace lingbot::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// What a primitive depends on: the shape and whether there is a bias.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, bool, bool>;

struct Prepared {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  memory weights;  // the call's weights in pd.weights_desc()'s layout
  bool reorder_src, reorder_dst;
};

}  // namespace

struct OnednnConvolutions::State {
  explicit State(bool bf16) : operands(bf16 ? memory::data_type::bf16 : memory::data_type::f32) {}
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  memory::data_type operands;  // of the input and the weights (the output is float32)
  std::map<Key, Prepared> prepared;
  std::vector<float> src_buffer, dst_buffer;  // activations in the primitive's layouts

  Prepared& prepare(const ConvShape& s, bool has_bias) {
    const Key key{s.n, s.c_in, s.h, s.w, s.c_out, s.kernel, s.stride, s.pad, has_bias, s.channels_last};
    auto it = prepared.find(key);
    if (it != prepared.end()) return it->second;
    const memory::dims src_dims{s.n, s.c_in, s.h, s.w}, dst_dims{s.n, s.c_out, s.out_h(), s.out_w()};
    const memory::dims w_dims{s.c_out, s.c_in, s.kernel, s.kernel};
    const memory::dims strides{s.stride, s.stride}, padding{s.pad, s.pad};
    const auto f32 = memory::data_type::f32;
    // Tag::any lets the primitive choose its blocked layouts.
    const memory::desc src_any(src_dims, operands, Tag::any), dst_any(dst_dims, f32, Tag::any);
    const memory::desc w_any(w_dims, operands, Tag::any), bias_md({s.c_out}, f32, Tag::a);
    const auto d = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              dnnl::algorithm::convolution_direct, src_any, w_any,
                                                              bias_md, dst_any, strides, padding, padding)
                            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              dnnl::algorithm::convolution_direct, src_any, w_any,
                                                              dst_any, strides, padding, padding);
    Prepared p{dnnl::convolution_forward::primitive_desc(d, engine), {}, {}, false, false};
    p.conv = dnnl::convolution_forward(p.pd);
    p.weights = memory(p.pd.weights_desc(), engine);
    const Tag maps = s.channels_last ? Tag::nhwc : Tag::nchw;
    p.reorder_src = p.pd.src_desc() != memory::desc(src_dims, f32, maps);
    p.reorder_dst = p.pd.dst_desc() != memory::desc(dst_dims, f32, maps);
    return prepared.emplace(key, std::move(p)).first->second;
  }
};

OnednnConvolutions::OnednnConvolutions(bool bf16_operands) : state_(std::make_unique<State>(bf16_operands)) {}
OnednnConvolutions::~OnednnConvolutions() = default;

void OnednnConvolutions::run(const ConvShape& s, const float* x, const float* w, const float* bias, float* out) {
  try {
    State& st = *state_;
    Prepared& p = st.prepare(s, bias != nullptr);
    const auto f32 = memory::data_type::f32;
    // The weights are reordered on every call (their bytes, a few MB at most,
    // against the convolution's GFLOPs): a cache keyed by their address
    // would go stale when a freed tensor's memory is reused.
    const Tag maps = s.channels_last ? Tag::nhwc : Tag::nchw;
    memory w_user({{s.c_out, s.c_in, s.kernel, s.kernel}, f32, s.channels_last ? Tag::ohwi : Tag::oihw}, st.engine,
                  const_cast<float*>(w));
    dnnl::reorder(w_user, p.weights).execute(st.stream, w_user, p.weights);
    memory x_user({{s.n, s.c_in, s.h, s.w}, f32, maps}, st.engine, const_cast<float*>(x));
    memory out_user({{s.n, s.c_out, s.out_h(), s.out_w()}, f32, maps}, st.engine, out);
    memory src = x_user, dst = out_user;
    if (p.reorder_src) {
      // Blocked layouts pad channels up to the block: size from the descriptor.
      st.src_buffer.resize(std::max(st.src_buffer.size(), p.pd.src_desc().get_size() / sizeof(float)));
      src = memory(p.pd.src_desc(), st.engine, st.src_buffer.data());
      dnnl::reorder(x_user, src).execute(st.stream, x_user, src);
    }
    if (p.reorder_dst) {
      st.dst_buffer.resize(std::max(st.dst_buffer.size(), p.pd.dst_desc().get_size() / sizeof(float)));
      dst = memory(p.pd.dst_desc(), st.engine, st.dst_buffer.data());
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, dst}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory({{s.c_out}, f32, Tag::a}, st.engine, const_cast<float*>(bias)));
    p.conv.execute(st.stream, args);
    if (p.reorder_dst) dnnl::reorder(dst, out_user).execute(st.stream, dst, out_user);
    st.stream.wait();
  } catch (const dnnl::error& e) {
    fail("conv2d: oneDNN failed ({}) on input [{}, {}, {}, {}], weights [{}, {}, {}, {}], stride {}, pad {}",
         e.what(), s.n, s.c_in, s.h, s.w, s.c_out, s.c_in, s.kernel, s.kernel, s.stride, s.pad);
  }
}

}  // namespace lingbot::cpu
