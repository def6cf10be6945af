// The KV cache's storage types (--kv-dtype): the e4m3 format and its
// quantiser against naive references, and the CPU stores holding exactly
// the naive roundings of what was appended, in both layouts, with scales
// that never change once a token is written, and bfloat16 rows held as
// their float32 values.
#include "backend/cpu/paged_kv_cache.h"
#include "kv/fp8_e4m3.h"
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace lingbot;
using namespace lingbot::kv;

namespace {

// ---- naive references, written from the format's definition ----------------

// (-1)^s 2^(e-7) (1 + m/8), subnormals 2^-6 (m/8), computed in double.
double naive_e4m3_value(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -magnitude : magnitude;
}

// The nearest finite e4m3 value by exhaustive search; a tie goes to the even
// code (an even mantissa); beyond 448 it saturates. Returns the code.
int naive_e4m3_encode(double x) {
  const bool negative = std::signbit(x);
  const double a = std::fabs(x);
  int best = 0;
  double best_err = INFINITY;
  for (int code = 0; code <= 0x7e; ++code) {  // every finite non-negative value
    const double err = std::fabs(naive_e4m3_value(code) - a);
    if (err < best_err || (err == best_err && code % 2 == 0)) {
      best = code;
      best_err = err;
    }
  }
  return (negative ? 0x80 : 0) | best;
}

// bf16 by hand: the two neighbours of x with 8 significant bits, nearest, ties even.
float naive_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t down = bits & 0xffff0000u, up = down + 0x10000u;
  float lo, hi;
  std::memcpy(&lo, &down, 4);
  std::memcpy(&hi, &up, 4);
  const double dl = std::fabs(double{x} - lo), dh = std::fabs(double{hi} - x);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (down >> 16) % 2 == 0 ? lo : hi;
}

// What an fp8 store must hold for one head's slice: e4m3(x / s) * s, s = max|x| / 448.
std::vector<float> naive_fp8_slice(const float* x, int n) {
  double amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(double{x[i]}));
  const float s = amax > 0 ? static_cast<float>(amax) / 448.f : 1.f;
  std::vector<float> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = static_cast<float>(naive_e4m3_value(naive_e4m3_encode(x[i] / s))) * s;
  return out;
}

}  // namespace

// ---- the format ---------------------------------------------------------------

TEST(E4m3, DecodesEveryCodeAsDefined) {
  for (int code = 0; code < 256; ++code) {
    const float got = e4m3_to_f32(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(got)) << code;
      continue;
    }
    EXPECT_EQ(double{got}, naive_e4m3_value(code)) << code;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.f, -6));  // smallest normal
}

TEST(E4m3, EncodesToNearestTiesToEvenAndSaturates) {
  std::vector<float> xs = {0.f, -0.f, 448.f, -448.f, 449.f, 463.9f, 464.f, 480.f, 1e6f, -1e30f,
                           std::ldexp(1.f, -10), std::ldexp(3.f, -11), 1e-12f, -1e-12f};
  // Every value, every midpoint between neighbours (the ties), and points
  // just beside each midpoint.
  for (int code = 0; code < 0x7e; ++code) {
    const double a = naive_e4m3_value(code), b = naive_e4m3_value(code + 1);
    const auto mid = static_cast<float>((a + b) / 2);
    ASSERT_EQ(double{mid}, (a + b) / 2);  // exact in float
    for (float x : {static_cast<float>(a), mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> exponent(-14.f, 10.f);
  for (int i = 0; i < 20000; ++i) xs.push_back((i % 2 ? -1.f : 1.f) * std::exp2(exponent(rng)));
  for (float x : xs) {
    ASSERT_EQ(int{f32_to_e4m3(x)}, naive_e4m3_encode(x)) << x;
  }
  EXPECT_EQ(f32_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::nanf("")) & 0x7f, 0x7f);
  for (int code = 0; code < 256; ++code) {  // every finite code survives a round trip
    if ((code & 0x7f) == 0x7f) continue;
    EXPECT_EQ(int{f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(code)))}, code == 0x80 ? 0x80 : code);
  }
}

TEST(E4m3, ScaleMapsTheLargestMagnitudeTo448) {
  const float x[5] = {0.5f, -3.25f, 1e-4f, 2.f, 0.f};
  uint8_t codes[5];
  const float s = quantise_e4m3(x, 5, codes);
  EXPECT_EQ(s, 3.25f / 448.f);
  EXPECT_EQ(codes[1], 0xfe);  // -448
  EXPECT_EQ(codes[4], 0x00);
  const std::vector<float> naive = naive_fp8_slice(x, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(e4m3_to_f32(codes[i]) * s, naive[static_cast<size_t>(i)]) << i;
  // An all-zero slice: scale 1, codes 0 (no division by zero).
  const float zeros[3] = {0.f, 0.f, 0.f};
  EXPECT_EQ(quantise_e4m3(zeros, 3, codes), 1.f);
  EXPECT_EQ(codes[0] | codes[1] | codes[2], 0);
}

TEST(KvDtype, ParsesTheOptionValues) {
  EXPECT_EQ(parse_kv_dtype("auto"), KvDtype::Auto);
  EXPECT_EQ(parse_kv_dtype("bf16"), KvDtype::Bf16);
  EXPECT_EQ(parse_kv_dtype("fp8"), KvDtype::Fp8);
  EXPECT_THROW(parse_kv_dtype("fp16"), Error);
}

// ---- the stores -----------------------------------------------------------------

namespace {

struct StoreCase {
  Layout layout;
  KvDtype dtype;
};

class KvStorage : public ::testing::TestWithParam<StoreCase> {};

TokenLayout storage_layout() {
  TokenLayout l;
  l.num_special = 3;
  l.num_patches = 5;
  l.num_heads = 2;
  l.head_dim = 16;
  return l;
}

// Rows whose heads span very different magnitudes (per-head scales matter).
Tensor spread_rows(const TokenLayout& l, int64_t n, std::mt19937& rng, float magnitude = 1.f) {
  std::normal_distribution<float> normal(0.f, 1.f);
  Tensor t = Tensor::empty({n, l.num_heads, l.head_dim});
  for (int64_t r = 0; r < n; ++r)
    for (int h = 0; h < l.num_heads; ++h)
      for (int c = 0; c < l.head_dim; ++c)
        t.f32()[(r * l.num_heads + h) * l.head_dim + c] = normal(rng) * magnitude * (h == 0 ? 1e-3f : 30.f);
  return t;
}

// The appended rows as the store must return them.
Tensor naive_stored(const Tensor& x, const TokenLayout& l, KvDtype dtype) {
  Tensor out = Tensor::empty(x.shape());
  const int64_t slices = x.numel() / l.head_dim;
  for (int64_t i = 0; i < slices; ++i) {
    const float* src = x.f32() + i * l.head_dim;
    float* dst = out.f32() + i * l.head_dim;
    if (dtype == KvDtype::Fp8) {
      const std::vector<float> q = naive_fp8_slice(src, l.head_dim);
      std::copy(q.begin(), q.end(), dst);
    } else {
      for (int c = 0; c < l.head_dim; ++c) dst[c] = dtype == KvDtype::Bf16 ? naive_bf16(src[c]) : src[c];
    }
  }
  return out;
}

bool same_bytes(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace

// One stored frame at a time, no eviction yet (W + S large): the visible set
// is every appended row in order, and each must be the naive rounding.
TEST_P(KvStorage, HoldsTheNaiveRoundingOfEveryAppendedRow) {
  const auto [layout, dtype] = GetParam();
  const TokenLayout l = storage_layout();
  CacheConfig config;
  config.dtype = dtype;
  auto cache = make_cpu_cache(layout, config, l, 1);
  std::mt19937 rng(3);
  std::vector<Tensor> ks, vs;
  for (int f = 0; f < 4; ++f) {
    cache->begin_step(1, true);
    ks.push_back(spread_rows(l, l.tokens_per_frame(), rng));
    vs.push_back(spread_rows(l, l.tokens_per_frame(), rng));
    cache->append(0, ks.back(), vs.back());
    cache->end_step();
  }
  const auto [gk, gv] = cache->gather_visible(0);
  ASSERT_EQ(gk.dim(0), 4 * l.tokens_per_frame());
  // Visible order: dense = frames in order; paged = frame (patch) pages, then
  // the special stream. Match each token row by where it came from.
  const int64_t row = l.row_floats();
  for (int f = 0; f < 4; ++f) {
    const Tensor want_k = naive_stored(ks[static_cast<size_t>(f)], l, dtype);
    const Tensor want_v = naive_stored(vs[static_cast<size_t>(f)], l, dtype);
    for (int t = 0; t < l.tokens_per_frame(); ++t) {
      int64_t at;  // the row's position in the visible set
      if (layout == Layout::Dense) {
        at = int64_t{f} * l.tokens_per_frame() + t;
      } else {
        at = t < l.num_special ? 4 * l.num_patches + int64_t{f} * l.num_special + t
                               : int64_t{f} * l.num_patches + (t - l.num_special);
      }
      EXPECT_TRUE(same_bytes(gk.f32() + at * row, want_k.f32() + t * row, row)) << "frame " << f << " token " << t;
      EXPECT_TRUE(same_bytes(gv.f32() + at * row, want_v.f32() + t * row, row)) << "frame " << f << " token " << t;
    }
  }
  const CacheStats s = cache->stats();
  const char* storage = dtype == KvDtype::Fp8 ? "e4m3" : dtype == KvDtype::Bf16 ? "bfloat16" : "float32";
  EXPECT_EQ(s.storage, storage);
  // Bytes per token (K and V): 2 * H * D * element size (+ 2 * H float scales for fp8).
  const int64_t token_bytes = dtype == KvDtype::Fp8    ? 2 * (row + 4 * l.num_heads)
                              : dtype == KvDtype::Bf16 ? 2 * row * 2
                                                       : 2 * row * 4;
  const int64_t tokens_held = layout == Layout::Dense ? s.visible_tokens : s.pages_in_use * s.page_size;
  EXPECT_EQ(s.bytes_in_use, tokens_held * token_bytes);
}

// A page filled over several appends (the paged layout's special stream,
// the dense layout's retained specials) keeps each token's codes and scale
// from its first write: later, far larger tokens on the same page do not
// change the earlier ones, and eviction moves tokens as stored.
TEST_P(KvStorage, ATokenKeepsItsStoredValueAsItsPageFillsAndItIsEvicted) {
  const auto [layout, dtype] = GetParam();
  const TokenLayout l = storage_layout();
  CacheConfig config;
  config.dtype = dtype;
  config.sliding_window = 2;
  config.scale_frames = 1;
  auto cache = make_cpu_cache(layout, config, l, 1);
  std::mt19937 rng(5);
  Tensor first_k, first_v;
  std::pair<Tensor, Tensor> after_first;
  for (int f = 0; f < 8; ++f) {
    cache->begin_step(1, true);
    // Frame 1 is small; every later frame 1000x larger, on the same special page.
    Tensor k = spread_rows(l, l.tokens_per_frame(), rng, f <= 1 ? 1.f : 1000.f);
    Tensor v = spread_rows(l, l.tokens_per_frame(), rng, f <= 1 ? 1.f : 1000.f);
    cache->append(0, k, v);
    cache->end_step();
    if (f == 1) {
      first_k = naive_stored(k, l, dtype);
      first_v = naive_stored(v, l, dtype);
    }
  }
  // Frame 1 is evicted by now (S = 1, W = 2): its specials are retained. Find
  // each of them in the visible set by value: it must be there bit for bit.
  const auto [gk, gv] = cache->gather_visible(0);
  const int64_t row = l.row_floats();
  for (int t = 0; t < l.num_special; ++t) {
    bool found = false;
    for (int64_t at = 0; at < gk.dim(0) && !found; ++at) {
      found = same_bytes(gk.f32() + at * row, first_k.f32() + t * row, row) &&
              same_bytes(gv.f32() + at * row, first_v.f32() + t * row, row);
    }
    EXPECT_TRUE(found) << "special " << t << " of frame 1";
  }
  EXPECT_EQ(cache->stats().frames_evicted, 5);
}

// The bf16 mode appends bfloat16 rows: every store holds them as it holds
// their float32 values (bf16 stored as they are, float32 widened, fp8
// quantised from the widened values), over steps that evict, with frames
// large enough for the parallel write (64 rows and more) and small specials.
TEST_P(KvStorage, TakesBfloat16RowsAsTheirFloat32Values) {
  const auto [layout, dtype] = GetParam();
  TokenLayout l = storage_layout();
  l.num_patches = 100;
  CacheConfig config;
  config.dtype = dtype;
  config.sliding_window = 2;
  config.scale_frames = 1;
  auto from_bf16 = make_cpu_cache(layout, config, l, 1);
  auto from_f32 = make_cpu_cache(layout, config, l, 1);
  std::mt19937 rng(11);
  for (int f = 0; f < 5; ++f) {
    const Tensor k = spread_rows(l, l.tokens_per_frame(), rng).to_dtype(DType::BF16);
    const Tensor v = spread_rows(l, l.tokens_per_frame(), rng).to_dtype(DType::BF16);
    from_bf16->begin_step(1, true);
    from_f32->begin_step(1, true);
    from_bf16->append(0, k, v);
    from_f32->append(0, k.to_dtype(DType::F32), v.to_dtype(DType::F32));
    from_bf16->end_step();
    from_f32->end_step();
    const auto [k1, v1] = from_bf16->gather_visible(0);
    const auto [k2, v2] = from_f32->gather_visible(0);
    ASSERT_EQ(k1.numel(), k2.numel()) << "frame " << f;
    EXPECT_TRUE(same_bytes(k1.f32(), k2.f32(), k1.numel())) << "frame " << f;
    EXPECT_TRUE(same_bytes(v1.f32(), v2.f32(), v1.numel())) << "frame " << f;
  }
  from_bf16->begin_step(1, true);
  const Tensor k = spread_rows(l, l.tokens_per_frame(), rng);
  EXPECT_THROW(from_bf16->append(0, k.to_dtype(DType::BF16), k), Error) << "k and v of different types";
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndDtypes, KvStorage,
                         ::testing::Values(StoreCase{Layout::Dense, KvDtype::Auto}, StoreCase{Layout::Paged, KvDtype::Auto},
                                           StoreCase{Layout::Dense, KvDtype::Bf16}, StoreCase{Layout::Paged, KvDtype::Bf16},
                                           StoreCase{Layout::Dense, KvDtype::Fp8}, StoreCase{Layout::Paged, KvDtype::Fp8}),
                         [](const auto& info) {
                           return std::string(layout_name(info.param.layout)) + "_" +
                                  std::string(kv_dtype_name(info.param.dtype));
                         });
