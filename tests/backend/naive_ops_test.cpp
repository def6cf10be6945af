// The naive reference checked against values worked out by hand, so that a
// mistake in naive_ops.h cannot pass the op table by agreeing with a backend
// that makes the same mistake.
#include "naive_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace lingbot::test::naive {
namespace {

void expect_values(const Tensor& got, const std::vector<float>& want, double tolerance = 1e-6) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.f32()[i], want[i], tolerance) << "element " << i;
}

TEST(BackendOpsNaive, Linear2x2) {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  const Tensor w = Tensor::from_vector({1, 0, 1, -1}, {2, 2});  // out[:, 0] = x0, out[:, 1] = x0 - x1
  const Tensor b = Tensor::from_vector({0.5f, -1}, {2});
  expect_values(linear(x, w, &b, Activation::None), {1.5f, -2, 3.5f, -2});
  expect_values(linear(x, w, nullptr, Activation::None), {1, -1, 3, -1});
  expect_values(linear(x, w, &b, Activation::Relu), {1.5f, 0, 3.5f, 0});
  // GELU(1) = 0.5 (1 + erf(1 / sqrt 2)) = 0.841344746...; GELU(-1) = -0.158655254...
  expect_values(linear(Tensor::from_vector({1, -1}, {2, 1}), Tensor::from_vector({1}, {1, 1}), nullptr,
                       Activation::Gelu),
                {0.841344746f, -0.158655254f});
  const Tensor g = Tensor::from_vector({2, 10}, {2});
  const Tensor r = Tensor::from_vector({1, 1, 1, 1}, {2, 2});
  expect_values(linear_residual(x, w, &b, &g, r), {4, -19, 8, -19});
}

// One query, two keys, head_dim 4 (scale 1/2): scores 0 and ln 3, so the
// softmax weights are 1/4 and 3/4.
TEST(BackendOpsNaive, KnownSoftmax) {
  const float ln3 = std::log(3.0f);
  const Tensor q = Tensor::from_vector({2, 0, 0, 0}, {1, 4});
  const Tensor k = Tensor::from_vector({0, 0, 0, 0, ln3, 0, 0, 0}, {2, 4});
  const Tensor v = Tensor::from_vector({4, 0, 0, 8, 0, 4, 8, 0}, {2, 4});
  Tensor out = Tensor::empty({1, 4});
  attend_rows(q.f32(), 1, k.f32(), v.f32(), 2, 1, 4, out.f32());
  expect_values(out, {1, 3, 6, 2});
  // Groups attend only inside themselves: two groups of one token each return their own v.
  const Tensor qq = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  expect_values(attention(qq, qq, Tensor::from_vector({5, 6, 7, 8}, {2, 2}), 2, 1, 2), {5, 6, 7, 8});
}

TEST(BackendOpsNaive, LayerNormAndModulation) {
  // mean 2, biased variance 2/3: (x - 2) / sqrt(2/3) = -1.2247449, 0, 1.2247449.
  expect_values(layer_norm(Tensor::from_vector({1, 2, 3}, {1, 3}), nullptr, nullptr, 0.0f),
                {-1.22474487f, 0, 1.22474487f});
  const Tensor w = Tensor::from_vector({2, 2, 2}, {3}), b = Tensor::from_vector({1, 1, 1}, {3});
  expect_values(layer_norm(Tensor::from_vector({1, 2, 3}, {1, 3}), &w, &b, 0.0f),
                {-1.44948974f, 1, 3.44948974f});
  // gate * (xn * (1 + scale) + shift) + residual = 3 * (2 * 1.5 + 1) + 10 = 22.
  expect_values(adaln_modulate(Tensor::from_vector({2}, {1, 1}), Tensor::from_vector({1, 0.5f, 3}, {1, 3}),
                               Tensor::from_vector({10}, {1, 1})),
                {22});
}

// head_dim 8: HalfSplit pairs (0,2) (1,3) (4,6) (5,7), Interleaved (0,1) (2,3) (4,5) (6,7).
TEST(BackendOpsNaive, RopePairsAndRotation) {
  const std::pair<int, int> half[] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(rope_pair(j, 8, RopeTable::Pairs::HalfSplit), half[j]) << "angle " << j;
    EXPECT_EQ(rope_pair(j, 8, RopeTable::Pairs::Interleaved), std::make_pair(2 * j, 2 * j + 1)) << "angle " << j;
  }
  // One token, one head; angle 0 a quarter turn ((a, b) -> (-b, a)), the others zero.
  std::vector<float> qkv(24);
  for (int i = 0; i < 24; ++i) qkv[i] = static_cast<float>(i + 1);
  HostRope rope{Tensor::from_vector({0, 1, 1, 1}, {1, 4}), Tensor::from_vector({1, 0, 0, 0}, {1, 4}),
                RopeTable::Pairs::HalfSplit};
  Qkv out = split_qkv(Tensor::from_vector(qkv, {1, 24}), 1, 8, nullptr, &rope);
  expect_values(out.q, {-3, 2, 1, 4, 5, 6, 7, 8});
  expect_values(out.k, {-11, 10, 9, 12, 13, 14, 15, 16});
  expect_values(out.v, {17, 18, 19, 20, 21, 22, 23, 24});
  rope.pairs = RopeTable::Pairs::Interleaved;
  out = split_qkv(Tensor::from_vector(qkv, {1, 24}), 1, 8, nullptr, &rope);
  expect_values(out.q, {-2, 1, 3, 4, 5, 6, 7, 8});
}

TEST(BackendOpsNaive, ImageOps) {
  // align_corners: 2x2 -> 3x3 puts the corners on the corners and the means between.
  expect_values(resize_bilinear(Tensor::from_vector({0, 1, 2, 3}, {1, 1, 2, 2}), nullptr, 3, 3),
                {0, 0.5f, 1, 1, 1.5f, 2, 2, 2.5f, 3});
  // 3x3 of 1..9, a 3x3 kernel of ones, stride 2, padding 1: sums of the 2x2 corners.
  std::vector<float> ones(9, 1.0f);
  expect_values(conv2d(Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}),
                       Tensor::from_vector(ones, {1, 1, 3, 3}), nullptr, 2, 1),
                {12, 16, 24, 28});
  // Kernel 2 = stride 2: each input pixel times the 2x2 kernel, plus the bias.
  const Tensor b = Tensor::from_vector({10}, {1});
  expect_values(conv_transpose2d(Tensor::from_vector({1, 2}, {1, 1, 1, 2}),
                                 Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}), &b, 2),
                {11, 12, 12, 14, 13, 14, 16, 18});
  // tokens [1, 2 positions, 3 channels] -> [1, 3, 1, 2].
  expect_values(tokens_to_nchw(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {1, 2, 3}), 1, 2), {1, 4, 2, 5, 3, 6});
}

TEST(BackendOpsNaive, RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f + 0x1p-8f), 1.0f);                 // tie, down to the even 1
  EXPECT_EQ(round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);   // tie, up to the even 1 + 2^-6
  EXPECT_EQ(round_bf16(0.1f), 0.10009765625f);
  EXPECT_EQ(round_f16(0.1f), 0.0999755859375f);
  EXPECT_EQ(round_f16(1.0f + 0x1p-11f), 1.0f);
  EXPECT_EQ(round_f16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  EXPECT_EQ(round_f16(65519.0f), 65504.0f);
  EXPECT_EQ(round_f16(65520.0f), INFINITY);
  EXPECT_EQ(round_f16(0x1p-25f), 0.0f);          // subnormal tie, down to 0
  EXPECT_EQ(round_f16(3 * 0x1p-25f), 0x1p-23f);  // subnormal tie, up to 2 * 2^-24
  EXPECT_TRUE(std::isnan(round_bf16(NAN)));
}

// Window 1, one scale frame; one special and one patch token per frame, one
// head of dimension 1. With q = 0 the softmax is uniform, so attend returns
// the mean of the visible values. Frame f's values: special 10f + 1, patch 10f + 2.
TEST(BackendOpsNaive, KvCacheEvictsAndRetains) {
  const kv::CacheConfig config{.sliding_window = 1, .scale_frames = 1};
  const kv::TokenLayout layout{.num_special = 1, .num_patches = 1, .num_heads = 1, .head_dim = 1};
  KvCache cache(config, layout, 1);
  const Tensor q = Tensor::from_vector({0, 0}, {2, 1, 1});
  auto step = [&](int f, bool store) {
    cache.begin_step(1, store);
    const Tensor kv = Tensor::from_vector({10.0f * f + 1, 10.0f * f + 2}, {2, 1, 1});
    cache.append(0, kv, kv);
    const float mean = cache.attend(0, q).f32()[0];
    cache.end_step();
    return mean;
  };
  EXPECT_FLOAT_EQ(step(0, true), 1.5f);                        // {1, 2}
  EXPECT_FLOAT_EQ(step(1, true), (1 + 2 + 11 + 12) / 4.0f);    // two frames = W + S: nothing evicted
  // Frame 1 is evicted as frame 2 arrives; its special (11) stays visible.
  EXPECT_FLOAT_EQ(step(2, true), (1 + 2 + 11 + 21 + 22) / 5.0f);
  // A non-keyframe sees the cache plus itself, and leaves the cache as it was.
  EXPECT_FLOAT_EQ(step(3, false), (1 + 2 + 11 + 21 + 22 + 31 + 32) / 7.0f);
  EXPECT_FLOAT_EQ(step(4, true), (1 + 2 + 11 + 21 + 41 + 42) / 6.0f);
}

}  // namespace
}  // namespace lingbot::test::naive
