// Packed Linear weights (packed_weights.h, OnednnMatmuls::pack_weights):
// oneDNN's products on packed weights against a naive product in double of
// the same values, in float32 and bf16; the packing's round trip; the CPU
// backend packing the fp32 mode's upload_linear_weight, reading the packed
// weights in linear() and linear_residual() as it reads row-major ones, and
// giving their values back; the registry forgetting a packed weight once
// its memory is freed, and holding the AMX tiles' layout too. Skipped where oneDNN has no packed layout (CPUs
// without AVX-512; bf16 also needs AVX512-BF16).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/onednn_matmul.h"
#include "backend/cpu/packed_weights.h"
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;

namespace {

bool packs(DType type) {
  if (type == DType::BF16 && !cpu_has_bf16_arithmetic()) return false;
  OnednnMatmuls matmuls;
  return matmuls.packs(type, 1024, 1024);
}

#define SKIP_UNLESS_PACKED(type) \
  if (!packs(type)) GTEST_SKIP() << "oneDNN has no packed " << dtype_name(type) << " layout on this CPU"

// Random values exactly representable in `type`, as float32.
std::vector<float> random_values(size_t n, uint32_t seed, DType type) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = type == DType::BF16 ? bf16_to_f32(f32_to_bf16(d(rng))) : d(rng);
  return v;
}

// The bytes `type` stores for values (float32 or bf16 bits).
std::vector<std::byte> stored(const std::vector<float>& values, DType type) {
  std::vector<std::byte> out(values.size() * dtype_size(type));
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == DType::BF16) {
      const uint16_t h = f32_to_bf16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    }
  }
  return out;
}

struct Case {
  int64_t rows, in, out;
};
// The model's weight shapes, with row counts that are not multiples of
// oneDNN's blocks.
const Case kCases[] = {{37, 1024, 3072}, {130, 1024, 1024}, {65, 1024, 4096}, {9, 4096, 1024}, {1, 1024, 1024}};

class PackedProducts : public ::testing::TestWithParam<DType> {};

TEST_P(PackedProducts, MatchTheNaiveProductOfTheSameValues) {
  const DType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  OnednnMatmuls matmuls;
  for (const Case& c : kCases) {
    ASSERT_TRUE(matmuls.packs(type, c.in, c.out)) << c.out << " x " << c.in;
    const auto x = random_values(static_cast<size_t>(c.rows * c.in), 1, type);
    const auto w = random_values(static_cast<size_t>(c.out * c.in), 2, type);
    const auto xs = stored(x, type), ws = stored(w, type);
    std::vector<float> bias(static_cast<size_t>(c.out));
    for (int64_t j = 0; j < c.out; ++j) bias[static_cast<size_t>(j)] = 0.01f * static_cast<float>(j % 17);
    std::vector<std::byte> packed(ws.size());
    matmuls.pack_weights(type, c.in, c.out, ws.data(), packed.data());
    // The packing moves the values: a packed weight is not its row-major self.
    EXPECT_NE(std::memcmp(packed.data(), ws.data(), ws.size()), 0);

    std::vector<float> on_packed(static_cast<size_t>(c.rows * c.out)), on_row_major(on_packed.size());
    matmuls.run({c.rows, c.in, c.out}, type, xs.data(), packed.data(), bias.data(), Activation::None,
                MatmulDst::F32, on_packed.data(), WeightLayout::Packed);
    matmuls.run({c.rows, c.in, c.out}, type, xs.data(), ws.data(), bias.data(), Activation::None, MatmulDst::F32,
                on_row_major.data(), WeightLayout::RowMajor);
    double worst = 0;
    for (int64_t i = 0; i < c.rows; ++i) {
      for (int64_t j = 0; j < c.out; ++j) {
        double sum = bias[static_cast<size_t>(j)], magnitude = 0;
        for (int64_t k = 0; k < c.in; ++k) {
          const double p = double{x[static_cast<size_t>(i * c.in + k)]} * w[static_cast<size_t>(j * c.in + k)];
          sum += p;
          magnitude += std::fabs(p);
        }
        const size_t at = static_cast<size_t>(i * c.out + j);
        // Float32 sums of products exact in float32 (bf16) or rounded once:
        // a few float32 ulps of the magnitude.
        worst = std::max(worst, std::fabs(on_packed[at] - sum) / (magnitude + 1e-30));
        ASSERT_NEAR(on_row_major[at], on_packed[at], 1e-5 * (magnitude + 1)) << i << ", " << j;
      }
    }
    EXPECT_LT(worst, 1e-5) << c.rows << " x " << c.in << " -> " << c.out;
  }
}

TEST_P(PackedProducts, UnpackingGivesTheRowMajorWeightsBack) {
  const DType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  OnednnMatmuls matmuls;
  const auto w = stored(random_values(3072 * 1024, 3, type), type);
  std::vector<std::byte> packed(w.size()), back(w.size());
  matmuls.pack_weights(type, 1024, 3072, w.data(), packed.data());
  matmuls.unpack_weights(type, 1024, 3072, packed.data(), back.data());
  EXPECT_EQ(back, w);
}

INSTANTIATE_TEST_SUITE_P(PackedWeights, PackedProducts, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

Tensor random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  Tensor t = Tensor::empty({rows, cols});
  const auto v = random_values(static_cast<size_t>(rows * cols), seed, DType::F32);
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

TEST(PackedWeights, TheFp32BackendPacksLinearWeightsAndReadsThemAsRowMajorOnes) {
  SKIP_UNLESS_PACKED(DType::F32);
  CpuBackend backend(2, resolve_isa("auto"));
  const Tensor host = random_matrix(1024, 1024, 4);
  const Tensor packed = backend.upload_linear_weight(host, DType::F32);
  const Tensor plain = backend.upload(host, DType::F32);
  ASSERT_EQ(packed.shape(), host.shape());
  ASSERT_EQ(packed.dtype(), DType::F32);
  EXPECT_NE(std::memcmp(packed.data(), host.data(), host.nbytes()), 0) << "not packed";
  EXPECT_NE(backend.name().find("packed weights"), std::string::npos) << backend.name();

  // download() and convert() unpack.
  const Tensor down = backend.download(packed);
  Tensor converted = Tensor::empty(host.shape(), DType::BF16);
  backend.convert(packed, converted);
  for (int64_t i = 0; i < host.numel(); ++i) {
    ASSERT_EQ(down.f32()[i], host.f32()[i]) << i;
    ASSERT_EQ(converted.data_as<uint16_t>()[i], f32_to_bf16(host.f32()[i])) << i;
  }

  // linear() (with GELU) and linear_residual() (with and without a gain)
  // give the row-major weights' results.
  const Tensor x = random_matrix(50, 1024, 5);
  const Tensor bias = random_matrix(1, 1024, 6).reshape({1024});
  const Tensor gain = random_matrix(1, 1024, 7).reshape({1024});
  for (const int variant : {0, 1, 2}) {
    Tensor a = variant == 0 ? Tensor::empty({50, 1024}) : random_matrix(50, 1024, 8);
    Tensor b = a.clone();
    if (variant == 0) {
      backend.linear(x, packed, &bias, a, Activation::Gelu);
      backend.linear(x, plain, &bias, b, Activation::Gelu);
    } else {
      backend.linear_residual(x, packed, &bias, variant == 2 ? &gain : nullptr, a);
      backend.linear_residual(x, plain, &bias, variant == 2 ? &gain : nullptr, b);
    }
    // Float32 sums of 1,024 products of unit-scale values (|sum| ~ 32, sum
    // of |products| ~ 800), added in another order: ~1e-5 apart.
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.f32()[i], b.f32()[i], 2e-4) << "variant " << variant << ", " << i;
  }
}

TEST(PackedWeights, TheBf16ModeKeepsItsWeightsRowMajor) {
  // oneDNN's AMX products ran no faster on packed bf16 weights: the bf16
  // mode keeps the layout upload() makes.
  SKIP_UNLESS_PACKED(DType::BF16);
  const Tensor host = random_matrix(1024, 1024, 9);
  for (const Bf16Products products : {Bf16Products::OnednnBf16, Bf16Products::WidenedSgemm}) {
    CpuBackend backend(2, resolve_isa("auto"), DType::BF16, products);
    const Tensor w = backend.upload_linear_weight(host, DType::BF16);
    const Tensor plain = backend.upload(host, DType::BF16);
    EXPECT_EQ(std::memcmp(w.data(), plain.data(), plain.nbytes()), 0) << bf16_products_name(products);
  }
}

TEST(PackedWeights, TheRegistryForgetsAWeightWhoseMemoryIsFreed) {
  SKIP_UNLESS_PACKED(DType::F32);
  OnednnMatmuls matmuls;
  PackedWeights weights;
  const Tensor w = random_matrix(1024, 1024, 10);
  Tensor packed = weights.pack(matmuls, w);
  ASSERT_TRUE(packed.defined());
  EXPECT_TRUE(weights.holds(packed));
  EXPECT_FALSE(weights.holds(w));
  EXPECT_FALSE(weights.holds(packed.clone()));
  void* const address = packed.data();
  packed = Tensor();
  // A tensor at the freed address (never read here) is not a packed one.
  const Tensor later = Tensor::wrap(address, {1024, 1024}, DType::F32, Device::CPU, std::make_shared<int>(0));
  EXPECT_FALSE(weights.holds(later));
}

}  // namespace

// The AMX tiles' layout (linear_amx.h) in the same registry: held, known as
// tiles, unpacked to the row-major values; shapes without tiles are left
// alone. The packing is plain code, so this runs on any CPU.
TEST(PackedWeights, AmxTilesAreHeldAsTilesAndUnpackToTheRowMajorValues) {
  OnednnMatmuls matmuls;
  PackedWeights weights;
  const Tensor w = random_matrix(96, 64, 11).to_dtype(DType::BF16);  // [out 96, in 64]
  const Tensor tiles = weights.pack_amx_tiles(w);
  ASSERT_TRUE(tiles.defined());
  EXPECT_TRUE(weights.holds(tiles));
  EXPECT_EQ(weights.layout_of(tiles), WeightLayout::AmxTiles);
  EXPECT_FALSE(weights.holds(w));
  EXPECT_NE(std::memcmp(tiles.data(), w.data(), w.nbytes()), 0);  // moved, not copied
  const Tensor back = weights.unpacked(matmuls, tiles);
  EXPECT_EQ(std::memcmp(back.data(), w.data(), w.nbytes()), 0);
  EXPECT_FALSE(weights.pack_amx_tiles(random_matrix(48, 64, 12).to_dtype(DType::BF16)).defined());  // 48 % 32
}
