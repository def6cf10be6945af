// oneDNN 2.6's bf16 matmul on a Linear layer's operands, timed for the
// dev/cpu experiments' comparisons: with a float32 result, and with the
// model's (bf16 with a bias). x [m, k] bf16 row-major, w [n, k] bf16
// row-major (read as W^T [k, n], "ba"), y [m, n] float32 (the first's result).
#pragma once

#include "median_time.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <string>
#include <vector>

struct OnednnLinearTimes {
  double f32_out_ms, bf16_out_bias_ms;
  std::string impl;  // the implementation oneDNN chose (brg:avx512_core_amx_bf16 on AMX)
};

inline OnednnLinearTimes time_onednn_bf16_linear(const uint16_t* x, const uint16_t* w, int m, int k, int n, float* y) {
  using dnnl::memory;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const memory::desc src({m, k}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc wei({k, n}, memory::data_type::bf16, memory::format_tag::ba);
  const memory::desc dst({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), eng);  // oneDNN 2.x
  const dnnl::matmul mm(pd);
  memory ms(src, eng, const_cast<uint16_t*>(x)), mw(wei, eng, const_cast<uint16_t*>(w)), md(dst, eng, y);
  OnednnLinearTimes t;
  t.impl = pd.impl_info_str();
  t.f32_out_ms = median_ms([&] {
    mm.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    strm.wait();
  });
  const memory::desc dst16({m, n}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc bias({1, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd16(dnnl::matmul::desc(src, wei, bias, dst16), eng);
  const dnnl::matmul mm16(pd16);
  std::vector<uint16_t> y16(static_cast<size_t>(m) * n);
  std::vector<float> b(static_cast<size_t>(n), 0.5f);
  memory md16(dst16, eng, y16.data()), mb(bias, eng, b.data());
  t.bf16_out_bias_ms = median_ms([&] {
    mm16.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md16}});
    strm.wait();
  });
  return t;
}
