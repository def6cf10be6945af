// The bf16 mode's choice of product kernel per CPU (bf16_products_choice.h):
// AMX takes oneDNN's products, no AVX512-BF16 the widened sgemm, and
// AVX512-BF16 alone a measurement of both, whose rule the choice follows;
// the run header says which and why.
#include "backend/cpu/bf16_products_choice.h"

#include "backend/cpu/onednn_matmul.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace lingbot;
using namespace lingbot::cpu;

namespace {

Bf16Products by_rule(const Bf16ProductsChoice& c) {
  return c.onednn_ms * kOnednnBf16Margin < c.widened_ms ? Bf16Products::OnednnBf16 : Bf16Products::WidenedSgemm;
}

TEST(Bf16ProductsChoice, FollowsTheCpusFeaturesAndOtherwiseTheMeasurement) {
  const Bf16ProductsChoice& c = bf16_products_choice();
  EXPECT_EQ(&c, &bf16_products_choice()) << "made once per process";
  EXPECT_EQ(bf16_products_for_this_cpu(), c.products);
  if (cpu_has_amx_bf16()) {
    EXPECT_EQ(c.products, Bf16Products::OnednnBf16);
    EXPECT_FALSE(c.measured);
    EXPECT_EQ(c.reason, "AMX");
  } else if (!cpu_has_bf16_arithmetic()) {
    EXPECT_EQ(c.products, Bf16Products::WidenedSgemm);
    EXPECT_FALSE(c.measured);
  } else {
    ASSERT_TRUE(c.measured);
    EXPECT_GT(c.onednn_ms, 0);
    EXPECT_GT(c.widened_ms, 0);
    EXPECT_EQ(c.products, by_rule(c)) << c.reason;
    std::printf("  %s: %s\n", bf16_products_name(c.products), c.reason.c_str());
  }
}

TEST(Bf16ProductsChoice, TheMeasurementTimesBothKernels) {
  if (!cpu_has_bf16_arithmetic()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  const Bf16ProductsChoice c = measure_bf16_products();
  EXPECT_TRUE(c.measured);
  EXPECT_TRUE(std::isfinite(c.onednn_ms) && c.onednn_ms > 0) << c.onednn_ms;
  EXPECT_TRUE(std::isfinite(c.widened_ms) && c.widened_ms > 0) << c.widened_ms;
  EXPECT_EQ(c.products, by_rule(c));
  EXPECT_NE(c.reason.find("measured here"), std::string::npos) << c.reason;
}

TEST(Bf16ProductsChoice, TheRunHeaderSaysWhichKernelAndWhy) {
  const std::string name = make_cpu_backend(2, "auto", "bf16")->name();
  const Bf16ProductsChoice& c = bf16_products_choice();
  EXPECT_NE(name.find(c.products == Bf16Products::OnednnBf16 ? "bf16: oneDNN matmul" : "bf16: weights widened"),
            std::string::npos)
      << name;
  EXPECT_NE(name.find(cpu_has_bf16_arithmetic() ? "(" + c.reason + ")" : std::string("(no AVX512-BF16)")),
            std::string::npos)
      << name;
}

}  // namespace
