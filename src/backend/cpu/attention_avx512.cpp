// The tiled attention kernel (attention_tiled.h) with AVX-512 vectors. This
// file alone is compiled with AVX-512 code generation (src/CMakeLists.txt);
// attention.cpp calls it only on CPUs that have AVX-512.
#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/exp2_avx512.h"

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
  static Reg exp2(Reg x) { return avx512::exp2_nonpositive(x); }  // x <= 0
};

}  // namespace

bool avx512_kernels_built() { return true; }

void attention_tiled_avx512(const float* q, int64_t nq, const KvSpan* spans, size_t count, int num_heads,
                            int head_dim, float scale, float* out, int threads, int query_tile,
                            const KeyRanges& ranges, const KeyRangeRows& range_rows, float* const* scratch) {
  tiled::attention_tiled<Avx512>(q, nq, spans, count, num_heads, head_dim, scale, out, threads, query_tile, ranges,
                                 range_rows, scratch);
}

}  // namespace lingbot::cpu::detail

#else  // a build without AVX-512 code generation (not x86-64)

namespace lingbot::cpu::detail {
bool avx512_kernels_built() { return false; }
void attention_tiled_avx512(const float*, int64_t, const KvSpan*, size_t, int, int, float, float*, int, int,
                            const KeyRanges&, const KeyRangeRows&, float* const*) {}
}  // namespace lingbot::cpu::detail

#endif
