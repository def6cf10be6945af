// The bf16 mode's KV bridge (backend/cpu/bf16_kv_bridge.h): a bf16 backend's
// cache, fed bfloat16 k, v and q, gives exactly what a float32 cache gives
// on the same values widened, rounded once to bfloat16; float32 tensors pass
// through untouched. Over steps with eviction, in both layouts.
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/onednn_matmul.h"
#include "core/half.h"
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace lingbot;

namespace {

// A float32 tensor of values that bfloat16 holds exactly.
Tensor bf16_exact(const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = bf16_to_f32(f32_to_bf16(normal(rng)));
  return t;
}

class Bf16KvBridge : public ::testing::TestWithParam<kv::Layout> {};

TEST_P(Bf16KvBridge, MatchesTheFloat32StoreOnWidenedValues) {
  if (!cpu::cpu_has_bf16_arithmetic()) GTEST_SKIP() << "this CPU lacks AVX512-BF16 (--cpu-dtype bf16)";
  auto backend = make_cpu_backend(1, "auto", "bf16");
  kv::CacheConfig config;
  config.sliding_window = 2;
  config.scale_frames = 1;
  const kv::TokenLayout tokens{.num_special = 2, .num_patches = 5, .num_heads = 2, .head_dim = 16};
  const int blocks = 2;
  auto bridged = backend->make_kv_cache(GetParam(), config, tokens, blocks);
  auto plain = kv::make_cpu_cache(GetParam(), config, tokens, blocks);
  std::mt19937 rng(5);
  const int64_t n = tokens.tokens_per_frame();
  const Shape shape{n, tokens.num_heads, tokens.head_dim};
  for (int step = 0; step < 5; ++step) {  // evicts from step 3 on
    const bool store = step != 3;         // one non-keyframe
    bridged->begin_step(1, store);
    plain->begin_step(1, store);
    for (int b = 0; b < blocks; ++b) {
      const Tensor k = bf16_exact(shape, rng), v = bf16_exact(shape, rng), q = bf16_exact(shape, rng);
      bridged->append(b, k.to_dtype(DType::BF16), v.to_dtype(DType::BF16));
      plain->append(b, k, v);
      Tensor out_bf16 = Tensor::empty(shape, DType::BF16), out_f32 = Tensor::empty(shape);
      Tensor expected = Tensor::empty(shape), through = Tensor::empty(shape);
      bridged->attend(b, q.to_dtype(DType::BF16), out_bf16);
      plain->attend(b, q, expected);
      bridged->attend(b, q, through);  // float32 passes straight through
      ASSERT_EQ(std::memcmp(through.data(), expected.data(), expected.nbytes()), 0) << "step " << step;
      const Tensor rounded = expected.to_dtype(DType::BF16);
      ASSERT_EQ(std::memcmp(out_bf16.data(), rounded.data(), rounded.nbytes()), 0) << "step " << step;
    }
    bridged->end_step();
    plain->end_step();
    EXPECT_EQ(bridged->stats().visible_tokens, plain->stats().visible_tokens);
  }
  // kv-dtype auto in the bf16 mode stores bfloat16: half the bytes, and (below) the same values.
  EXPECT_EQ(bridged->stats().storage, "bfloat16");
  EXPECT_EQ(plain->stats().storage, "float32");
  EXPECT_EQ(2 * bridged->stats().bytes_in_use, plain->stats().bytes_in_use);
  // The stored keys are the widened bf16 values, bit for bit.
  const auto [k_bridged, v_bridged] = bridged->gather_visible(1);
  const auto [k_plain, v_plain] = plain->gather_visible(1);
  ASSERT_EQ(k_bridged.nbytes(), k_plain.nbytes());
  EXPECT_EQ(std::memcmp(k_bridged.data(), k_plain.data(), k_plain.nbytes()), 0);
  EXPECT_EQ(std::memcmp(v_bridged.data(), v_plain.data(), v_plain.nbytes()), 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Bf16KvBridge, ::testing::Values(kv::Layout::Dense, kv::Layout::Paged),
                         [](const auto& info) { return std::string(kv::layout_name(info.param)); });

}  // namespace
