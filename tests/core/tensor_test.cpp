#include "core/tensor.h"

#include <gtest/gtest.h>

using namespace lingbot;

TEST(Tensor, ViewsShareMemory) {
  Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor row = t[1];
  EXPECT_EQ(row.shape(), (Shape{2}));
  EXPECT_EQ(row.f32()[0], 2.f);
  row.f32()[1] = 42.f;
  EXPECT_EQ(t.f32()[3], 42.f);
  Tensor flat = t.reshape({-1});
  EXPECT_EQ(flat.shape(), (Shape{6}));
  Tensor s = t.slice(1, 2);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.f32()[0], 2.f);
}

TEST(Tensor, BadShapesAreErrors) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_THROW(t.reshape({4, 2}), Error);
  EXPECT_THROW(t.slice(1, 2), Error);
  EXPECT_THROW(t.dim(2), Error);
  EXPECT_THROW(Tensor::empty({2, 3}, DType::F32, Device::CUDA).numel(), Error);
}

TEST(Tensor, DtypeConversionRoundTrips) {
  Tensor t = Tensor::from_vector({0.5f, -1.25f, 3.0f}, {3});
  Tensor back = t.to_dtype(DType::BF16).to_dtype(DType::F32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back.f32()[i], t.f32()[i]);
}
