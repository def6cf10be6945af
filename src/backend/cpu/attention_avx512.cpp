// The tiled attention kernel (attention_tiled.h) with AVX-512 vectors. This
// file alone is compiled with AVX-512 code generation (src/CMakeLists.txt);
// attention.cpp calls it only on CPUs that have AVX-512.
#include "backend/cpu/attention_tiled.h"

#if defined(__AVX512F__)
#include <immintrin.h>

namespace lingbot::cpu::detail {

namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int kWidth = 16;       // floats per vector
  static constexpr int kLaneVectors = 3;  // 48 query lanes per register tile
  static constexpr int kTileRows = 8;     // 24 accumulators of the 32 registers; 64 = 8 x 8 rows
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  // 2^x for x <= 0, as the AVX2 build's (attention.cpp): the same degree-7
  // polynomial on the fraction, then scalef for the power of two.
  static Reg exp2(Reg x) {
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
};

}  // namespace

bool avx512_kernels_built() { return true; }

void attention_tiled_avx512(const float* q, int64_t nq, const KvSpan* spans, size_t count, int num_heads,
                            int head_dim, float scale, float* out, int threads, int query_tile,
                            float* const* scratch) {
  tiled::attention_tiled<Avx512>(q, nq, spans, count, num_heads, head_dim, scale, out, threads, query_tile,
                                 scratch);
}

}  // namespace lingbot::cpu::detail

#else  // a build without AVX-512 code generation (not x86-64)

namespace lingbot::cpu::detail {
bool avx512_kernels_built() { return false; }
void attention_tiled_avx512(const float*, int64_t, const KvSpan*, size_t, int, int, float, float*, int, int,
                            float* const*) {}
}  // namespace lingbot::cpu::detail

#endif
