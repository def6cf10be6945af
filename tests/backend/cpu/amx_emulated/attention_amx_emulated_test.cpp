// The bf16 attention's AMX kernel (src/backend/cpu/attention_amx.cpp) on
// emulated tiles (amx_emulation.h, force-included into this binary's copy of
// the kernel): its packing of keys and values into the tiles' layouts, its
// strides, paddings and key blocks, against the double-precision reference
// (the cases of the real kernels' test) and against the oneDNN kernel. On a
// CPU without AMX, as CI's, this is what checks that code; the tiles
// themselves are checked by AttentionBf16/Kernels.*/Amx where the CPU has AMX.
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/attention_splits.h"
#include "backend/cpu/attention_tiled.h"

#include "backend/cpu/attention_bf16_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using namespace lingbot::cpu;
using namespace lingbot::cpu::bf16_attention_cases;

namespace {

// Every (head, query tile, key range) item of the kernel, as
// attention_bf16() hands them out (tiles of at most 512 queries, padded to
// 32 rows; ranges of whole key blocks, merged by combine_key_ranges).
void emulated_amx_attention(const float* q, int64_t nq, const std::vector<KvSpan>& spans, int heads, int D,
                            float scale, float* out, int splits = 1) {
  const int64_t tiles = (nq + 511) / 512;
  const int tile = static_cast<int>(((nq + tiles - 1) / tiles + 31) / 32 * 32);
  const size_t block = static_cast<size_t>(detail::kBf16KeyBlock) * D;
  std::vector<uint16_t> qb(static_cast<size_t>(tile) * D), k(block), v(block), kp(block), vp(block),
      p(size_t{64} * detail::kBf16KeyBlock);
  std::vector<float> s(p.size()), o(qb.size()), m(static_cast<size_t>(tile)), l(m.size()), row(2 * D);
  const detail::AmxScratch scratch{qb.data(), k.data(), v.data(), kp.data(), vp.data(), s.data(),
                                   p.data(),  o.data(), m.data(), l.data(),  row.data()};
  int64_t keys = 0;
  for (const KvSpan& span : spans) keys += span.tokens;
  const KeyRanges ranges = KeyRanges::make(nq, keys, heads, detail::kBf16KeyBlock, splits);
  const KeyRangeRows parts =
      ranges.count > 1 ? KeyRangeRows::of_this_thread(ranges.count, nq, heads, D) : KeyRangeRows{};
  detail::amx_begin_tiles();
  for (int sp = 0; sp < ranges.count; ++sp) {
    detail::Bf16ItemTarget item;
    item.first_key = ranges.first(sp);
    item.key_count = ranges.keys(sp);
    item.out = ranges.count == 1 ? out : parts.rows_of(sp);
    item.lse = ranges.count == 1 ? nullptr : parts.lse_of(sp);
    for (int h = 0; h < heads; ++h) {
      for (int64_t i0 = 0; i0 < nq; i0 += tile) {
        detail::amx_attention_item(q, nq, spans.data(), spans.size(), heads, D, scale * tiled::kLog2e, item, h, i0,
                                   tile, scratch);
      }
    }
  }
  detail::amx_end_tiles();
  if (ranges.count > 1) combine_key_ranges(parts, ranges.count, nq, heads, D, out);
}

bool can_run() { return detail::amx_attention_built() && detail::bf16_attention_avx512_built() && cpu_supports(Isa::Avx512); }

}  // namespace

TEST(AmxAttentionEmulated, MatchesTheReferenceWithinPsRounding) {
  if (!can_run()) GTEST_SKIP() << "the kernel's softmax needs AVX-512";
  expect_within_ps_rounding([](const float* q, int64_t nq, const std::vector<KvSpan>& spans, int heads, int dim,
                               float scale, float* out) { emulated_amx_attention(q, nq, spans, heads, dim, scale, out); });
}

// Each split's items see only their keys and give their rows' log-sum-exps:
// merged, the rows are the softmax over all keys.
TEST(AmxAttentionEmulated, KeySplitsMatchTheReferenceWithinPsRounding) {
  if (!can_run()) GTEST_SKIP() << "the kernel's softmax needs AVX-512";
  for (int splits : {2, 3}) {
    SCOPED_TRACE(splits);
    expect_within_ps_rounding([splits](const float* q, int64_t nq, const std::vector<KvSpan>& spans, int heads,
                                       int dim, float scale, float* out) {
      emulated_amx_attention(q, nq, spans, heads, dim, scale, out, splits);
    });
  }
}

TEST(AmxAttentionEmulated, AgreesWithTheOnednnKernel) {
  if (!can_run() || !detail::bf16_kernel_available(detail::Bf16Kernel::Onednn, 64)) {
    GTEST_SKIP() << "needs AVX-512 and oneDNN's bf16 matmul";
  }
  std::mt19937 rng(9);
  const Case c{600, 2, 64, {972, 300, 12}, 1.f, KvElement::Bf16};
  const Data d = make(c, rng);
  std::vector<float> amx(d.q.size()), onednn(d.q.size());
  emulated_amx_attention(d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f, amx.data());
  detail::attention_bf16_with(detail::Bf16Kernel::Onednn, d.q.data(), c.nq, d.spans, c.heads, c.dim, 0.125f,
                              onednn.data());
  double worst = 0;
  for (size_t i = 0; i < amx.size(); ++i) worst = std::max(worst, std::fabs(double{amx[i]} - onednn[i]));
  EXPECT_LE(worst, 1e-4 * d.vmax);
}
