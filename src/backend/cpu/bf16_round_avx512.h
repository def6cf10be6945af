// float32 -> bfloat16 in AVX-512 vectors, and the masks of a row's tail,
// shared by the bf16 attention's AVX-512 and AMX files. Include only from
// files built with AVX-512 code generation; internal linkage, so no copy of
// it can reach code built for another ISA.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace lingbot::cpu::avx512 {
namespace {

// 16 floats -> 16 bfloat16 bits, round to nearest even (finite inputs: the
// scores' exponentials and the model's queries, keys and values).
inline __m256i to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

// The first min(count, 16) lanes (none for count <= 0).
inline __mmask16 tail_mask(int count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

}  // namespace
}  // namespace lingbot::cpu::avx512

#endif
