// The CPU backend's parallel memory helpers (backend/cpu/parallel.h) against
// plain loops: every byte copied once, none beyond the end, any size.
#include "backend/cpu/parallel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

using namespace lingbot::cpu;

TEST(ParallelCopy, CopiesEveryByteOfAnySize) {
  omp_set_num_threads(2);
  for (const size_t bytes : {size_t{0}, size_t{1}, size_t{4095}, (size_t{1} << 20) + 3, (size_t{3} << 20) + 5}) {
    std::vector<unsigned char> src(bytes), dst(bytes + 16, 0xAB);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + i / 251);
    parallel_copy(dst.data(), src.data(), bytes);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[i], src[i]) << "byte " << i << " of " << bytes;
    for (size_t i = bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "written past the end, " << bytes;
  }
}

TEST(ParallelFirstTouch, WritesOnlyTheFirstFloatOfEachPage) {
  omp_set_num_threads(2);
  const int64_t page = 4096 / sizeof(float);
  std::vector<float> v(static_cast<size_t>(300 * page + 17), 5.0f);
  parallel_first_touch(v.data(), static_cast<int64_t>(v.size()) - 1);  // the last float stays out of range
  for (size_t i = 0; i < v.size(); ++i) {
    const bool touched = static_cast<int64_t>(i) % page == 0 && static_cast<int64_t>(i) < static_cast<int64_t>(v.size()) - 1;
    ASSERT_EQ(v[i], touched ? 0.0f : 5.0f) << i;
  }
}
