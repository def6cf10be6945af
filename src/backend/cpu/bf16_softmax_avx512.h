// The online softmax step of the bf16 attention kernels (attention_bf16.h),
// in AVX-512 vectors: one key block's scores -> running max m and sum l,
// O rescaled by alpha, and P rounded to bfloat16 for the next product.
//
// Shared by the oneDNN kernel (attention_bf16_avx512.cpp) and the AMX kernel
// (attention_amx.cpp), instantiated with a rounding of float32 to bf16:
// AVX512-BF16's conversion instruction (the AMX kernel, as every AMX CPU has
// it, and the oneDNN kernel where the CPU has it) or integer arithmetic (the
// oneDNN kernel elsewhere). Both round to nearest even, so P is the same for
// every normal value.
//
// The exponential is a degree-4 polynomial, not the fp32 kernels' degree 7
// (exp2_avx512.h): P is rounded to bf16 (8 significant bits) right after,
// and the polynomial's 3e-6 relative error is far below that step; l sums
// the unrounded values, so its error is the same 3e-6.
//
// Include only from files built with AVX-512 code generation; internal
// linkage, so no copy can reach code built for another ISA.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <math.h>  // exp2f: libm's, so no inline library code is compiled here
#include <cstdint>

namespace lingbot::cpu::avx512 {
namespace {

// 2^x for x <= 0 (a little above 0 is fine: the row maximum's own score,
// whose fused multiply-subtract can leave a rounding residual): 2^floor(x)
// times p(x - floor(x)), p fitted to 2^f on [0, 1] for relative error (3e-6)
// with p(0) = 1, so the maximum contributes exactly 1 to l.
inline __m512 exp2_for_bf16(__m512 x) {
  const __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  // x - floor(x)
  __m512 p = _mm512_set1_ps(0.013426696881651878f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.052242446690797806f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.2412802278995514f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6930448412895203f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, x);  // scalef multiplies by 2^floor(x)
}

// The first min(count, 16) lanes (none for count <= 0).
inline __mmask16 lanes(int count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

// One key block's step for `rows` query rows. s [rows][ld] float32 scores,
// of which the first n are keys; m, l the rows' running max (of s c) and
// sum; o [rows][head_dim] scaled by alpha = 2^(m_old - m_new) in place; p
// [rows][ld] the bf16 bits of 2^(s c - m_new), 0 beyond n. ld is a multiple
// of 32; c > 0. Round32 maps two float32 vectors to their 32 bf16 values.
template <class Round32>
inline void bf16_softmax_step(const float* s, int rows, int n, int ld, float c, float* m, float* l, float* o,
                              int head_dim, uint16_t* p, Round32 round32) {
  const __m512 vc = _mm512_set1_ps(c);
  const int full32 = n / 32 * 32;
  for (int r = 0; r < rows; ++r) {
    const float* sr = s + int64_t{r} * ld;
    uint16_t* pr = p + int64_t{r} * ld;
    // The block's maximum of the raw scores: c > 0, so max(s c) = c max(s)
    // exactly (rounding is monotonic). Four chains hide max's latency.
    __m512 mx[4];
    for (__m512& v : mx) v = _mm512_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 64 <= n; j += 64)
      for (int u = 0; u < 4; ++u) mx[u] = _mm512_max_ps(mx[u], _mm512_loadu_ps(sr + j + 16 * u));
    for (; j < n; j += 16) mx[0] = _mm512_mask_max_ps(mx[0], lanes(n - j), mx[0], _mm512_maskz_loadu_ps(lanes(n - j), sr + j));
    const float block_max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(mx[0], mx[1]), _mm512_max_ps(mx[2], mx[3]))) * c;
    const float m_new = block_max > m[r] ? block_max : m[r];
    const bool first = m[r] == -INFINITY;  // O and l are still 0
    const float alpha = first ? 0.f : ::exp2f(m[r] - m_new);
    const __m512 vm = _mm512_set1_ps(m_new);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    for (j = 0; j < full32; j += 32) {
      const __m512 e0 = exp2_for_bf16(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j), vc, vm));
      const __m512 e1 = exp2_for_bf16(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j + 16), vc, vm));
      sum0 = _mm512_add_ps(sum0, e0);
      sum1 = _mm512_add_ps(sum1, e1);
      _mm512_storeu_si512(pr + j, round32(e0, e1));
    }
    for (; j < ld; j += 32) {  // the last keys and the padding (P 0 there)
      const __mmask16 k0 = lanes(n - j), k1 = lanes(n - j - 16);
      const __m512 e0 = _mm512_maskz_mov_ps(k0, exp2_for_bf16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k0, sr + j), vc, vm)));
      const __m512 e1 =
          _mm512_maskz_mov_ps(k1, exp2_for_bf16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k1, sr + j + 16), vc, vm)));
      sum0 = _mm512_add_ps(sum0, e0);
      sum1 = _mm512_add_ps(sum1, e1);
      _mm512_storeu_si512(pr + j, round32(e0, e1));
    }
    l[r] = l[r] * alpha + _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
    m[r] = m_new;
    if (!first && alpha != 1.f) {  // the maximum moved
      float* orow = o + int64_t{r} * head_dim;
      const __m512 va = _mm512_set1_ps(alpha);
      for (int d = 0; d < head_dim; d += 16) {
        const __mmask16 k = lanes(head_dim - d);
        _mm512_mask_storeu_ps(orow + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, orow + d), va));
      }
    }
  }
}

}  // namespace
}  // namespace lingbot::cpu::avx512

#endif
