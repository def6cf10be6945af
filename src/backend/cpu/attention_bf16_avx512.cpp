// The element-wise passes of attention_bf16() (attention_bf16.h) with
// AVX-512 vectors. This file alone is compiled with AVX-512 code generation
// (src/CMakeLists.txt; with AVX512-BF16's too, used only by
// bf16_softmax_step_avx512bf16, which runs only where the CPU has it), and
// attention_bf16() runs only on CPUs with AVX-512;
// as in attention_avx512.cpp, nothing here instantiates a library template
// (plain loops, internal linkage), so no AVX-512 copy of shared inline code
// can reach the rest of the program.
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/bf16_softmax_avx512.h"

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

}  // namespace

bool bf16_attention_avx512_built() { return true; }

void bf16_round_rows_avx512(const float* src, int64_t src_ld, int rows, int cols, uint16_t* dst, int64_t dst_ld) {
  for (int r = 0; r < rows; ++r) {
    const float* s = src + r * src_ld;
    uint16_t* d = dst + r * dst_ld;
    for (int j = 0; j < cols; j += 16) {
      const __mmask16 k = avx512::lanes(cols - j);
      _mm256_mask_storeu_epi16(d + j, k, to_bf16(_mm512_maskz_loadu_ps(k, s + j)));
    }
  }
}

void bf16_softmax_step_avx512(const float* s, int rows, int n, int ld, float c, float* m, float* l, float* o,
                              int head_dim, uint16_t* p) {
  avx512::bf16_softmax_step(s, rows, n, ld, c, m, l, o, head_dim, p, [](__m512 a, __m512 b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(a)), to_bf16(b), 1);
  });
}

void bf16_softmax_step_avx512bf16(const float* s, int rows, int n, int ld, float c, float* m, float* l, float* o,
                                  int head_dim, uint16_t* p) {
  avx512::bf16_softmax_step(s, rows, n, ld, c, m, l, o, head_dim, p,
                            [](__m512 a, __m512 b) { return (__m512i)_mm512_cvtne2ps_pbh(b, a); });
}

}  // namespace lingbot::cpu::detail

#else  // a build without AVX-512 code generation (not x86-64)

namespace lingbot::cpu::detail {
bool bf16_attention_avx512_built() { return false; }
void bf16_round_rows_avx512(const float*, int64_t, int, int, uint16_t*, int64_t) {}
void bf16_softmax_step_avx512(const float*, int, int, int, float, float*, float*, float*, int, uint16_t*) {}
void bf16_softmax_step_avx512bf16(const float*, int, int, int, float, float*, float*, float*, int, uint16_t*) {}
}  // namespace lingbot::cpu::detail

#endif
