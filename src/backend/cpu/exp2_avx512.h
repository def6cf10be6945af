// 2^x for x <= 0 in AVX-512 vectors, shared by the AVX-512 attention files
// (attention_avx512.cpp, attention_bf16_avx512.cpp): the AVX2 build's
// degree-7 polynomial on the fraction (attention.cpp), then scalef for the
// power of two, so every attention kernel's softmax weights agree. Include
// only from files built with AVX-512 code generation; internal linkage, so
// no copy of it can reach code built for another ISA.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace lingbot::cpu::avx512 {
namespace {

inline __m512 exp2_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-126.f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.525273380405984e-05f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530393381608e-04f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618129107628477e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550410866482158e-02f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402265069591007e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471805599453e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace
}  // namespace lingbot::cpu::avx512

#endif
