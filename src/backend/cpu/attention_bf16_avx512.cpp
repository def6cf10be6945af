// The element-wise passes of attention_bf16() (attention_bf16.h) with
// AVX-512 vectors. This file alone is compiled with AVX-512 code generation
// (src/CMakeLists.txt), and attention_bf16() runs only on CPUs with AVX-512;
// as in attention_avx512.cpp, nothing here instantiates a library template
// (plain loops, internal linkage), so no AVX-512 copy of shared inline code
// can reach the rest of the program.
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/exp2_avx512.h"

#if defined(__AVX512F__)
#include <immintrin.h>

namespace lingbot::cpu::detail {

namespace {

// 16 floats -> 16 bfloat16 bits, round to nearest even (finite inputs: the
// scores' exponentials and the model's queries, keys and values).
__m256i to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

// The first min(count, 16) lanes (none for count <= 0).
__mmask16 tail_mask(int count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

}  // namespace

bool bf16_attention_avx512_built() { return true; }

void bf16_round_rows_avx512(const float* src, int64_t src_ld, int rows, int cols, uint16_t* dst, int64_t dst_ld) {
  for (int r = 0; r < rows; ++r) {
    const float* s = src + r * src_ld;
    uint16_t* d = dst + r * dst_ld;
    for (int j = 0; j < cols; j += 16) {
      const __mmask16 k = tail_mask(cols - j);
      _mm256_mask_storeu_epi16(d + j, k, to_bf16(_mm512_maskz_loadu_ps(k, s + j)));
    }
  }
}

void bf16_softmax_step_avx512(const float* s, int rows, int n, int ld, float c, float* m, float* l, float* o,
                              int head_dim, uint16_t* p) {
  const __m512 vc = _mm512_set1_ps(c);
  for (int r = 0; r < rows; ++r) {
    const float* sr = s + int64_t{r} * ld;
    uint16_t* pr = p + int64_t{r} * ld;
    __m512 vmax = _mm512_set1_ps(-__builtin_inff());
    for (int j = 0; j < n; j += 16) {
      const __mmask16 k = tail_mask(n - j);
      vmax = _mm512_mask_max_ps(vmax, k, vmax, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, sr + j), vc));
    }
    const float block_max = _mm512_reduce_max_ps(vmax);
    const float m_new = block_max > m[r] ? block_max : m[r];
    const float alpha = _mm512_cvtss_f32(avx512::exp2_nonpositive(_mm512_set1_ps(m[r] - m_new)));  // 0 on the first block
    const __m512 vm = _mm512_set1_ps(m_new);
    __m512 vsum = _mm512_setzero_ps();
    for (int j = 0; j < ld; j += 16) {
      const __mmask16 k = tail_mask(n - j);
      const __m512 x = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, sr + j), vc, vm);
      const __m512 e = _mm512_maskz_mov_ps(k, avx512::exp2_nonpositive(x));  // padding keys: 0
      vsum = _mm512_add_ps(vsum, e);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pr + j), to_bf16(e));
    }
    l[r] = l[r] * alpha + _mm512_reduce_add_ps(vsum);
    m[r] = m_new;
    float* orow = o + int64_t{r} * head_dim;
    const __m512 va = _mm512_set1_ps(alpha);
    for (int d = 0; d < head_dim; d += 16) {
      const __mmask16 k = tail_mask(head_dim - d);
      _mm512_mask_storeu_ps(orow + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, orow + d), va));
    }
  }
}

}  // namespace lingbot::cpu::detail

#else  // a build without AVX-512 code generation (not x86-64)

namespace lingbot::cpu::detail {
bool bf16_attention_avx512_built() { return false; }
void bf16_round_rows_avx512(const float*, int64_t, int, int, uint16_t*, int64_t) {}
void bf16_softmax_step_avx512(const float*, int, int, int, float, float*, float*, float*, int, uint16_t*) {}
}  // namespace lingbot::cpu::detail

#endif
