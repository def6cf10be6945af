// The fp8 KV cache's read-back (kv_fp8.h: launch_kv_dequantise) on hand-made
// pages, element by element: every staged bfloat16 must be
// f32_to_bf16(e4m3_to_f32(code) * scale), the stored value rounded once,
// computed here on the host from kv/fp8_e4m3.h. Every non-NaN code occurs
// (the quantiser saturates, so a store holds no NaN code from finite input),
// with scales across many binades, for head_dim 64 (the 16-codes-per-thread
// kernel) and head_dim 8 (the per-element one), on block 1 of 2 (the block
// stride) and with the staging pages in another order than the pool's.
#include "backend/cuda/kv/kv_fp8.h"
#include "backend/cuda/kv/kv_table.h"
#include "kv/fp8_e4m3.h"

#include "attention_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace lingbot;
using namespace lingbot::cuda;

namespace {

void check_read_back(int head_dim, int num_heads, int page_size) {
  const Fp8PageShape shape{page_size, num_heads, head_dim};
  constexpr int kPages = 3, kBlocks = 2, kBlock = 1;
  const int64_t page_bytes = shape.page_bytes();
  const int64_t block_stride = kPages * page_bytes;
  std::vector<char> pool(static_cast<size_t>(kBlocks * block_stride));
  std::mt19937 rng(static_cast<uint32_t>(head_dim * 131 + page_size));
  std::uniform_real_distribution<float> exponent(-20.f, 12.f);
  int next_code = 0;
  for (int64_t page = 0; page < kBlocks * kPages; ++page) {
    char* base = pool.data() + page * page_bytes;
    auto* codes = reinterpret_cast<uint8_t*>(base);
    for (int64_t i = 0; i < shape.codes_bytes(); ++i) {
      uint8_t code = static_cast<uint8_t>(next_code++ % 256);
      if ((code & 0x7fu) == 0x7fu) code ^= 0x01u;  // the NaN codes -> +-448
      codes[i] = code;
    }
    next_code += 37;  // each page starts at another code
    auto* scales = reinterpret_cast<float*>(base + shape.codes_bytes());
    for (int64_t i = 0; i < 2 * int64_t{page_size} * num_heads; ++i) scales[i] = std::exp2(exponent(rng)) * 1.37f;
  }
  char* pool_dev = static_cast<char*>(device_malloc(pool.size(), "test fp8 pages"));
  LB_CUDA_CHECK(cudaMemcpy(pool_dev, pool.data(), pool.size(), cudaMemcpyHostToDevice));

  const int64_t staged_bytes = 2 * int64_t{page_size} * num_heads * head_dim * 2;
  char* staged_dev = static_cast<char*>(device_malloc(static_cast<size_t>(kPages * staged_bytes), "test staging"));
  LB_CUDA_CHECK(cudaMemset(staged_dev, 0xff, static_cast<size_t>(kPages * staged_bytes)));

  // Visible page i is pool page order[i]; it is staged to staging page i.
  const int order[kPages] = {2, 0, 1};
  KvTableHeader pages_header;
  pages_header.num_pages = kPages;
  pages_header.page_size = page_size;
  pages_header.block_stride = block_stride;
  std::vector<char*> page_ptrs, staged_ptrs;
  for (int i = 0; i < kPages; ++i) {
    page_ptrs.push_back(pool_dev + order[i] * page_bytes);
    staged_ptrs.push_back(staged_dev + int64_t{i} * staged_bytes);
  }
  KvTableHeader staged_header = pages_header;
  staged_header.block_stride = 0;
  KvTable pages(nullptr), staging(nullptr);
  pages.upload(pages_header, page_ptrs, {});
  staging.upload(staged_header, staged_ptrs, {});
  launch_kv_dequantise(pages.device(), kBlock, staging.device(), shape, nullptr);
  LB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> staged(static_cast<size_t>(kPages * staged_bytes / 2));
  LB_CUDA_CHECK(cudaMemcpy(staged.data(), staged_dev, static_cast<size_t>(kPages * staged_bytes), cudaMemcpyDeviceToHost));
  device_free(pool_dev);
  device_free(staged_dev);

  int64_t wrong = 0;
  for (int i = 0; i < kPages; ++i) {
    const char* base = pool.data() + kBlock * block_stride + order[i] * page_bytes;
    const auto* codes = reinterpret_cast<const uint8_t*>(base);
    const auto* scales = reinterpret_cast<const float*>(base + shape.codes_bytes());
    for (int64_t e = 0; e < shape.codes_bytes(); ++e) {  // [kv][slot][head][dim]: scale [kv][slot][head]
      const uint16_t want = f32_to_bf16(kv::e4m3_to_f32(codes[e]) * scales[e / head_dim]);
      const uint16_t got = staged[static_cast<size_t>(i * staged_bytes / 2 + e)];
      if (got != want && ++wrong <= 5) {
        ADD_FAILURE() << "head_dim " << head_dim << " staged page " << i << " element " << e << ": code 0x" << std::hex
                      << int{codes[e]} << " staged 0x" << got << ", want 0x" << want;
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "head_dim " << head_dim;
}

}  // namespace

TEST(CudaKvFp8ReadBack, IsTheStoredValueRoundedOnce) {
  LB_REQUIRE_GPU();
  check_read_back(64, 2, 5);   // the model's heads: the vector kernel
  check_read_back(128, 3, 4);  // two heads' worth of chunks per head
  check_read_back(8, 2, 5);    // below 16 codes per head: the per-element kernel
}
