// KvCache behaviour beyond the random properties: misuse errors, lazy
// allocation, reset, stats, the camera head's cache, and a 100,000-frame
// stream with flat patch memory.
#include "backend/cpu/paged_kv_cache.h"
#include "kv/kv_cache.h"

#include "kv_test_support.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <string>

using namespace lingbot;
using namespace lingbot::kv;

namespace {

TokenLayout small_layout() {
  TokenLayout l;
  l.num_special = 6;
  l.num_patches = 4;
  l.num_heads = 2;
  l.head_dim = 4;
  return l;
}

CacheConfig small_config() {
  CacheConfig c;
  c.sliding_window = 3;
  c.scale_frames = 2;
  return c;
}

Tensor rows(const TokenLayout& l, int64_t n, float value = 1.f) {
  Tensor t = Tensor::empty({n, l.num_heads, l.head_dim});
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = value;
  return t;
}

// Expects `f` to throw a lingbot::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class KvCacheBoth : public ::testing::TestWithParam<Layout> {};

}  // namespace

TEST_P(KvCacheBoth, MisuseIsAClearError) {
  const TokenLayout l = small_layout();
  auto cache = make_cpu_cache(GetParam(), small_config(), l, 2);
  const Tensor k = rows(l, 10), v = rows(l, 10);
  Tensor q = rows(l, 3), out = rows(l, 3);

  expect_error([&] { cache->append(0, k, v); }, "outside a step");
  expect_error([&] { cache->attend(0, q, out); }, "outside a step");
  expect_error([&] { cache->end_step(); }, "without begin_step");
  expect_error([&] { cache->begin_step(0, true); }, "num_frames");

  cache->begin_step(1, true);
  expect_error([&] { cache->begin_step(1, true); }, "still open");
  expect_error([&] { cache->attend(0, q, out); }, "before append");
  expect_error([&] { cache->append(2, k, v); }, "out of range");
  expect_error([&] { cache->append(0, rows(l, 9), v); }, "[10, 2, 4]");  // token count
  expect_error([&] { cache->append(0, k, Tensor::empty({10, 3, 4})); }, "[10, 2, 4]");  // heads
  expect_error([&] { cache->append(0, k, Tensor::empty({10, 2, 5})); }, "[10, 2, 4]");  // head_dim
  expect_error([&] { cache->append(0, k.to_dtype(DType::BF16), v); }, "float32");
  expect_error([&] { cache->append(0, Tensor(), v); }, "undefined");
  const Tensor on_gpu = Tensor::wrap(k.data(), k.shape(), DType::F32, Device::CUDA, nullptr);
  expect_error([&] { cache->append(0, on_gpu, v); }, "cpu");
  cache->append(0, k, v);
  expect_error([&] { cache->append(0, k, v); }, "twice");
  expect_error([&] { cache->end_step(); }, "block 1 was not appended");
  Tensor bad_out = rows(l, 4);
  expect_error([&] { cache->attend(0, q, bad_out); }, "out");
  expect_error([&] { cache->attend(0, q, q); }, "overlaps");
  // Refused calls changed nothing: the step completes normally.
  cache->attend(0, q, out);
  cache->append(1, k, v);
  cache->end_step();
  EXPECT_EQ(cache->stats().frames_stored, 1);
  EXPECT_EQ(cache->stats().visible_tokens, 10);

  EXPECT_THROW(make_cpu_cache(GetParam(), small_config(), l, 0), Error);
  CacheConfig bad = small_config();
  bad.sliding_window = 0;
  EXPECT_THROW(make_cpu_cache(GetParam(), bad, l, 1), Error);
  TokenLayout bad_layout = l;
  bad_layout.num_heads = 0;
  EXPECT_THROW(make_cpu_cache(GetParam(), small_config(), bad_layout, 1), Error);
}

TEST_P(KvCacheBoth, LazyAllocationStatsAndReset) {
  const TokenLayout l = small_layout();
  const int blocks = 3;
  auto cache = make_cpu_cache(GetParam(), small_config(), l, blocks);
  EXPECT_EQ(cache->stats().bytes_reserved, 0);  // nothing before the first step
  EXPECT_EQ(cache->stats().bytes_allocated_total, 0);
  const auto stream = [&] {
    for (int f = 0; f < 12; ++f) {
      const bool store = f % 4 != 3;  // every 4th frame a non-keyframe
      cache->begin_step(1, store);
      for (int b = 0; b < blocks; ++b) cache->append(b, rows(l, 10), rows(l, 10));
      cache->end_step();
    }
  };
  stream();
  const CacheStats s = cache->stats();
  // 9 stored frames into S = 2 + W = 3: 4 evicted, 6 specials each retained.
  EXPECT_EQ(s.frames_seen, 12);
  EXPECT_EQ(s.frames_stored, 9);
  EXPECT_EQ(s.frames_listed, 5);
  EXPECT_EQ(s.scale_frames, 2);
  EXPECT_EQ(s.window_frames, 3);
  EXPECT_EQ(s.frames_evicted, 4);
  EXPECT_EQ(s.special_tokens_retained, 24);
  EXPECT_EQ(s.visible_tokens, 24 + 5 * 10);
  EXPECT_GT(s.bytes_reserved, 0);
  EXPECT_GE(s.bytes_reserved, s.bytes_in_use);
  EXPECT_EQ(s.bytes_allocated_total, s.bytes_reserved);
  EXPECT_EQ(s.storage, "float32");
  if (GetParam() == Layout::Paged) {
    EXPECT_EQ(s.page_size, 4);
    EXPECT_EQ(s.frame_pages, 5);
    EXPECT_EQ(s.special_stream_tokens, 9 * 6);
    EXPECT_EQ(s.special_pages, (9 * 6 + 3) / 4);
    EXPECT_EQ(s.pages_in_use, s.frame_pages + s.special_pages);
    EXPECT_EQ(s.pages_in_use + s.pages_free, s.pages_pool);
    EXPECT_EQ(s.bytes_in_use, s.pages_in_use * 2 * 4 * 8 * 4 * blocks);
  } else {
    EXPECT_EQ(s.bytes_in_use, s.visible_tokens * 2 * 8 * 4 * blocks);
  }
  const std::string line = format_stats(s);
  EXPECT_NE(line.find("stored 9"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);

  cache->reset();
  const CacheStats r = cache->stats();
  EXPECT_EQ(r.frames_seen, 0);
  EXPECT_EQ(r.frames_listed, 0);
  EXPECT_EQ(r.visible_tokens, 0);
  EXPECT_EQ(r.pages_in_use, 0);
  EXPECT_EQ(r.pages_pool, 0);
  // The memory stays for the next stream (issue #19): the same stream again
  // reaches the same state and allocates nothing.
  EXPECT_EQ(r.bytes_reserved, s.bytes_reserved);
  stream();
  const CacheStats again = cache->stats();
  EXPECT_EQ(again.bytes_allocated_total, s.bytes_allocated_total);
  EXPECT_EQ(again.visible_tokens, s.visible_tokens);
  EXPECT_EQ(again.pages_pool, s.pages_pool);
  EXPECT_EQ(again.bytes_in_use, s.bytes_in_use);
  cache->reset();
  // Reset inside a step abandons it.
  cache->begin_step(1, true);
  cache->reset();
  EXPECT_FALSE(cache->in_step());
  cache->begin_step(1, true);
  for (int b = 0; b < blocks; ++b) cache->append(b, rows(l, 10), rows(l, 10));
  cache->end_step();
  EXPECT_EQ(cache->stats().visible_tokens, 10);
}

TEST_P(KvCacheBoth, CameraHeadCacheKeepsEveryStoredFrame) {
  // The camera head: one token per frame, head_dim 128; upstream never evicts such frames.
  TokenLayout l;
  l.num_special = 0;
  l.num_patches = 1;
  l.num_heads = 16;
  l.head_dim = 128;
  auto cache = make_cpu_cache(GetParam(), CacheConfig{}, l, 4);
  const int frames = test::under_sanitizer() ? 90 : 200;  // > S + W = 72
  for (int f = 0; f < frames; ++f) {
    cache->begin_step(1, f % 5 != 4);
    for (int b = 0; b < 4; ++b) cache->append(b, rows(l, 1, float(f)), rows(l, 1, float(f)));
    Tensor q = rows(l, 1, 0.f), out = rows(l, 1);
    cache->attend(0, q, out);  // q = 0: uniform weights, out = mean of the visible values
    const auto stats = cache->stats();
    // Visible: every stored frame so far plus this one if it is not stored.
    double sum = 0;
    int64_t n = 0;
    for (int g = 0; g <= f; ++g) {
      if (g % 5 != 4 || g == f) {
        sum += g;
        ++n;
      }
    }
    EXPECT_NEAR(out.f32()[0], sum / n, 1e-3 * (sum / n + 1)) << "frame " << f;
    cache->end_step();
    EXPECT_EQ(stats.frames_evicted, 0);
  }
  EXPECT_EQ(cache->stats().frames_listed, frames - frames / 5);
}

INSTANTIATE_TEST_SUITE_P(Layouts, KvCacheBoth, ::testing::Values(Layout::Dense, Layout::Paged),
                         [](const auto& info) { return std::string(layout_name(info.param)); });

// A long stream: patch memory stays flat, the special stream grows by exactly
// the permanent specials of each stored frame (6, or 1 with camera_only), and
// nothing limits the stream length. Tiny tokens so it runs in about a second.
TEST(KvCacheLongStream, HundredThousandFramesWithFlatPatchMemory) {
  const int frames = test::iterations(100000);
  for (bool camera_only : {false, true}) {
    CacheConfig c;  // W = 64, S = 8
    c.camera_only = camera_only;
    TokenLayout l;
    l.num_special = 6;
    l.num_patches = 4;
    l.num_heads = 1;
    l.head_dim = 2;
    auto paged = make_cpu_cache(Layout::Paged, c, l, 1);
    auto dense = make_cpu_cache(Layout::Dense, c, l, 1);
    const auto& planner = dynamic_cast<const cpu::PagedKvCache&>(*paged).planner();
    const int per_frame = camera_only ? 1 : 6;
    const int page_size = planner.page_size();
    const int64_t page_bytes = int64_t{2} * page_size * 2 * 4;
    const Tensor k = rows(l, 10), v = rows(l, 10);
    int64_t max_frame_pool = 0;
    for (int f = 0; f < frames; ++f) {
      paged->begin_step(1, true);
      dense->begin_step(1, true);
      paged->append(0, k, v);
      dense->append(0, k, v);
      if (f % 20000 == 19999) {
        Tensor q = rows(l, 2, 0.f), out = rows(l, 2);
        paged->attend(0, q, out);
        EXPECT_FLOAT_EQ(out.f32()[0], 1.f);
      }
      paged->end_step();
      dense->end_step();
      const CacheStats s = paged->stats();
      ASSERT_EQ(s.special_stream_tokens, int64_t{f + 1} * per_frame) << "frame " << f;
      ASSERT_EQ(s.frame_pages, std::min<int64_t>(f + 1, 72));
      ASSERT_EQ(s.special_pages, (s.special_stream_tokens + page_size - 1) / page_size);
      // Pool = stream pages + frame pages (<= S + W + 1 at the peak of a step) + one growth chunk.
      max_frame_pool = std::max(max_frame_pool, s.pages_pool - s.special_pages);
      ASSERT_LE(s.pages_pool - s.special_pages, 72 + 1 + c.pool_growth_pages);
      ASSERT_EQ(s.bytes_reserved, s.pages_pool * page_bytes);
      const CacheStats d = dense->stats();
      ASSERT_EQ(d.special_tokens_retained, std::max<int64_t>(0, f + 1 - 72) * per_frame);
      ASSERT_EQ(d.visible_tokens, s.visible_tokens);
    }
    EXPECT_LE(max_frame_pool, 72 + 1 + c.pool_growth_pages);
    // Dense memory: listed frames in slabs that do not grow, retained specials in chunks.
    const CacheStats d = dense->stats();
    const int64_t token_bytes = 2 * 2 * 4;
    EXPECT_LE(d.bytes_reserved, (d.visible_tokens + (int64_t{1} << 20)) * token_bytes * 2);
  }
}

namespace {

// This process's resident memory (VmRSS), or -1 where /proc is missing.
int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t kb = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmRSS: %" SCNd64, &kb) == 1) break;
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

}  // namespace

// Issue #19: the paged store's pool grows by several pages at a time, but
// only the pages written take memory (each is faulted in before its first
// write), and reset() gives that memory back while keeping the chunks.
TEST(PagedKvStore, OnlyThePagesWrittenTakeMemory) {
  if (resident_bytes() < 0) GTEST_SKIP() << "no /proc/self/status";
  TokenLayout l;
  l.num_special = 6;
  l.num_patches = 8186;  // a page of 8186 float32 K and V rows of 16 x 64: 64 MiB
  l.num_heads = 16;
  l.head_dim = 64;
  CacheConfig c;
  c.pool_growth_pages = 4;
  const double page = 2.0 * l.num_patches * l.row_floats() * sizeof(float);
  auto cache = make_cpu_cache(Layout::Paged, c, l, 1);
  const Tensor k = rows(l, l.tokens_per_frame(), 0.5f), v = rows(l, l.tokens_per_frame(), 0.25f);
  Tensor q = rows(l, 1), out = rows(l, 1);
  const auto one_frame = [&] {
    cache->begin_step(1, true);
    cache->append(0, k, v);
    cache->attend(0, q, out);
    cache->end_step();
  };
  for (int stream = 0; stream < 2; ++stream) {
    const int64_t before = resident_bytes();
    one_frame();  // one frame page and the specials' page of a 4-page chunk
    const double grown = static_cast<double>(resident_bytes() - before);
    EXPECT_GT(grown, 1.5 * page) << "stream " << stream;
    EXPECT_LT(grown, 2.5 * page) << "stream " << stream;
    EXPECT_EQ(cache->stats().bytes_reserved, static_cast<int64_t>(4 * page)) << "stream " << stream;
    EXPECT_FLOAT_EQ(out.f32()[0], 0.25f);  // softmax over equal keys: the value
    const int64_t full = resident_bytes();
    cache->reset();
    EXPECT_GT(static_cast<double>(full - resident_bytes()), 1.5 * page) << "stream " << stream;
  }
}
