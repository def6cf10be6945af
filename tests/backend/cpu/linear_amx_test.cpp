// The bf16 mode's Linear kernel on AMX tiles (backend/cpu/linear_amx.h): the
// weights' tile layout everywhere, the kernel on this CPU's tiles where it
// has AMX (elsewhere amx_emulated/linear_amx_emulated_test.cpp runs the same
// cases on emulated tiles).
#include "backend/cpu/linear_amx.h"

#include "linear_amx_cases.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;
using namespace lingbot::cpu::linear_amx_cases;

namespace {

void on_this_cpu(const Case& c, const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, const float* bias,
                 void* dst) {
  std::vector<uint16_t> tiles(w.size());
  linear_amx_pack_weights(w.data(), c.in, c.out, tiles.data());
  linear_amx(x.data(), c.rows, c.in, tiles.data(), c.out, bias, c.act, c.kind, dst);
}

}  // namespace

TEST(LinearAmx, OnlyMultiplesOf32HaveTheTileLayout) {
  EXPECT_TRUE(linear_amx_fits(1024, 3072));
  EXPECT_TRUE(linear_amx_fits(32, 32));
  EXPECT_FALSE(linear_amx_fits(1000, 1024));
  EXPECT_FALSE(linear_amx_fits(1024, 16));
  EXPECT_FALSE(linear_amx_fits(0, 32));
}

// tdpbf16ps reads its B tile as 16 rows of 16 column pairs: row r, column c,
// element p is B's (k = 2r + p, n = c), i.e. w[n][k] for a Linear weight
// (Intel SDM, TDPBF16PS). Tile (nb, kb) covers outputs 16 nb .. and inputs
// 32 kb .., and the tiles of one nb lie together, kb by kb.
TEST(LinearAmx, EachWeightLandsWhereTdpbf16psReadsIt) {
  const int64_t in = 96, out = 64;
  std::vector<uint16_t> w(static_cast<size_t>(in * out));
  std::iota(w.begin(), w.end(), uint16_t{0});  // w[o][i] = o * in + i
  std::vector<uint16_t> tiles(w.size());
  linear_amx_pack_weights(w.data(), in, out, tiles.data());
  for (int64_t nb = 0; nb < out / 16; ++nb)
    for (int64_t kb = 0; kb < in / 32; ++kb) {
      const uint16_t* tile = tiles.data() + (nb * (in / 32) + kb) * 512;
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
          for (int p = 0; p < 2; ++p) {
            const int64_t o = nb * 16 + c, i = kb * 32 + 2 * r + p;
            ASSERT_EQ(tile[(r * 16 + c) * 2 + p], o * in + i) << "nb " << nb << " kb " << kb << " r " << r;
          }
    }
  std::vector<uint16_t> back(w.size());
  linear_amx_unpack_weights(tiles.data(), in, out, back.data());
  EXPECT_EQ(back, w);
}

TEST(LinearAmx, MatchesFloat64OnThisCpusTiles) {
  if (!linear_amx_available()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU (the emulated test covers the kernel)";
  for (const Case& c : cases()) check(c, on_this_cpu);
}

TEST(LinearAmx, SameBitsOnAnyThreadCount) {
  if (!linear_amx_available()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU (the emulated test covers the kernel)";
  check_same_bits({70, 512, 288, true, Activation::Gelu, MatmulDst::F32}, on_this_cpu, 1, 4);
}
