// GPU attention within groups (attention_dense): every kernel against the
// CPU fp64 reference (cpu::attention_reference) on sampled rows, the fast
// kernels against the GPU naive twin on every row, at the model's shapes and
// at odd ones. Outputs are poisoned with NaN before each run.
//
// Error bounds (relative, per tensor; each head vector within 4x):
//   bf16: 1e-2. Inputs are bf16 and the reference uses the same rounded
//     values, so the error is the output's rounding to bf16 (rms ~2^-9 ~
//     2e-3 relative) plus, for the mma kernel, the rounding of the softmax
//     weights P to bf16 before P V (again ~2e-3 relative, independent per
//     key, so it does not grow with the key count). Measured errors are
//     printed; a missing or extra block of 16 keys out of 978 moves the
//     output by several percent.
//   f32: 1e-5. fp32 products and sums (fp64 in the naive twin) and exp2 with
//     ~2^-22 relative error: ~1e-6 expected.
#include "backend/cpu/attention.h"
#include "backend/cuda/attention/attention.h"

#include "attention_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace lingbot;
using namespace lingbot::cuda;
namespace ct = lingbot::cuda::test;

namespace {

struct DenseCase {
  int groups;
  int n;  // rows per group
  int heads;
  int head_dim;
  DType dtype;
};

std::string describe(const DenseCase& c) {
  return fmt::format("{} groups x {} rows, {} heads x {}, {}", c.groups, c.n, c.heads, c.head_dim,
                     dtype_name(c.dtype));
}

// CPU fp64 reference for the listed query rows: [rows.size(), H, D].
Tensor reference_rows(const DenseCase& c, const Tensor& q, const Tensor& k, const Tensor& v,
                      const std::vector<int64_t>& rows) {
  const int64_t row = int64_t{c.heads} * c.head_dim;
  Tensor out = Tensor::empty({static_cast<int64_t>(rows.size()), c.heads, c.head_dim});
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t g = rows[r] / c.n;
    const cpu::KvSpan span{k.f32() + g * c.n * row, v.f32() + g * c.n * row, c.n};
    cpu::attention_reference(q.f32() + rows[r] * row, 1, {&span, 1}, c.heads, c.head_dim,
                             1.f / std::sqrt(static_cast<float>(c.head_dim)), out.f32() + static_cast<int64_t>(r) * row);
  }
  return out;
}

// only: a Hopper kernel (and the naive twin it is checked against) instead
// of the portable kernels, in tests of its own so that a fault there cannot
// hide the others' results (each test is its own process). Auto: none.
void run_case(const DenseCase& c, std::mt19937& rng, AttentionKernel only = AttentionKernel::Auto) {
  SCOPED_TRACE(describe(c));
  const int64_t total = int64_t{c.groups} * c.n;
  const Shape shape{total, int64_t{c.heads} * c.head_dim};
  const Tensor q = ct::round_to(ct::random_normal(shape, rng), c.dtype);
  const Tensor k = ct::round_to(ct::random_normal(shape, rng), c.dtype);
  const Tensor v = ct::round_to(ct::random_normal(shape, rng), c.dtype);
  const Tensor dq = ct::upload(q, c.dtype), dk = ct::upload(k, c.dtype), dv = ct::upload(v, c.dtype);

  const std::vector<int64_t> rows = ct::sample_rows(total, 48, rng);
  const Tensor ref = reference_rows(c, q, k, v, rows);
  const double bound = ct::bound_for(c.dtype);

  std::vector<AttentionKernel> kernels = {AttentionKernel::Naive, AttentionKernel::Warp, AttentionKernel::Auto};
  if (c.dtype == DType::BF16 && c.head_dim == 64) kernels.push_back(AttentionKernel::Mma);
  if (only != AttentionKernel::Auto) kernels = {AttentionKernel::Naive, only};
  Tensor naive;
  for (AttentionKernel kernel : kernels) {
    Tensor out = ct::device_empty(shape, c.dtype);
    ct::poison(out);
    attention_dense_with(kernel, dq, dk, dv, c.groups, c.heads, c.head_dim, out, nullptr);
    LB_CUDA_CHECK(cudaGetLastError());
    const Tensor got = ct::download(out);
    const std::string what = fmt::format("{} kernel", attention_kernel_name(kernel));
    const auto vs_ref = ct::close_on_rows(got, ref, rows, c.heads, c.head_dim, bound, what + " vs cpu reference");
    EXPECT_TRUE(vs_ref);
    ::testing::Test::RecordProperty(fmt::format("{} {}", describe(c), what), vs_ref.message());
    if (kernel == AttentionKernel::Naive) {
      naive = got;
    } else {
      // Every row, against the naive twin (itself rounded to the dtype).
      EXPECT_TRUE(ct::close_on_rows(got, naive, ct::all_rows(total), c.heads, c.head_dim, 2 * bound,
                                    what + " vs naive twin"));
    }
  }
}

}  // namespace

TEST(CudaAttentionDense, ModelShapes) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(101);
  run_case({1, 978, 16, 64, DType::BF16}, rng);  // a frame block / the encoder, one frame
  run_case({8, 978, 16, 64, DType::BF16}, rng);  // frame blocks in the scale phase
  run_case({3, 977, 16, 64, DType::BF16}, rng);  // frames of 977 tokens
  run_case({1, 7824, 16, 64, DType::BF16}, rng);  // the scale phase's 8 frames attending to each other
}

TEST(CudaAttentionDense, OddShapes) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(202);
  run_case({1, 1, 1, 64, DType::BF16}, rng);     // one key
  run_case({5, 1, 3, 64, DType::BF16}, rng);     // groups of one row
  run_case({3, 37, 2, 64, DType::BF16}, rng);    // less than a tile
  run_case({2, 127, 2, 64, DType::BF16}, rng);   // tile edges: 127, 128, 129 rows
  run_case({2, 128, 2, 64, DType::BF16}, rng);
  run_case({2, 129, 2, 64, DType::BF16}, rng);
  run_case({1, 65, 4, 64, DType::BF16}, rng);    // a key tile and one more key
  run_case({2, 300, 2, 64, DType::F32}, rng);
  run_case({2, 100, 3, 16, DType::BF16}, rng);   // the small CI model's head sizes
  run_case({2, 100, 3, 32, DType::BF16}, rng);
  run_case({2, 100, 3, 16, DType::F32}, rng);
  run_case({2, 100, 3, 32, DType::F32}, rng);
  run_case({1, 70, 2, 128, DType::F32}, rng);    // the camera head's head size
  run_case({1, 70, 2, 128, DType::BF16}, rng);
  run_case({1, 33, 1, 200, DType::F32}, rng);    // head_dim not a multiple of 32
  run_case({1, 20, 1, 256, DType::BF16}, rng);   // the largest supported head_dim
  run_case({1, 40, 2, 3, DType::F32}, rng);      // tiny head_dim
}

// Peaked softmax: one key per query carries almost all the weight, so the
// output must be that key's value (checks that every key position is read,
// at tile edges and at the last key, independently of the reference).
TEST(CudaAttentionDense, EveryKeyPositionIsReachable) {
  LB_REQUIRE_GPU();
  std::mt19937 rng(303);
  for (DType dtype : {DType::BF16, DType::F32}) {
    const int n = 300, heads = 2, d = 64;
    const int64_t row = int64_t{heads} * d;
    Tensor k = ct::random_normal({n, row}, rng);
    const Tensor v = ct::round_to(ct::random_normal({n, row}, rng), dtype);
    // Query i targets key (i * 7) % n (a permutation: 7 and 300 are coprime).
    Tensor q = Tensor::empty({n, row});
    for (int i = 0; i < n; ++i) {
      const int t = (i * 7) % n;
      for (int h = 0; h < heads; ++h) {
        double norm = 0;
        for (int c = 0; c < d; ++c) norm += double(k.f32()[t * row + h * d + c]) * k.f32()[t * row + h * d + c];
        const double alpha = 60.0 / std::sqrt(norm) * std::sqrt(static_cast<double>(d));
        for (int c = 0; c < d; ++c) q.f32()[i * row + h * d + c] = static_cast<float>(alpha * k.f32()[t * row + h * d + c]);
      }
    }
    k = ct::round_to(k, dtype);
    q = ct::round_to(q, dtype);
    Tensor expected = Tensor::empty({n, row});
    for (int i = 0; i < n; ++i) {
      const int t = (i * 7) % n;
      std::memcpy(expected.f32() + i * row, v.f32() + t * row, static_cast<size_t>(row) * sizeof(float));
    }
    const Tensor dq = ct::upload(q, dtype), dk = ct::upload(k, dtype), dv = ct::upload(v, dtype);
    std::vector<AttentionKernel> kernels = {AttentionKernel::Naive, AttentionKernel::Warp};
    if (dtype == DType::BF16) kernels.push_back(AttentionKernel::Mma);
    for (AttentionKernel kernel : kernels) {
      Tensor out = ct::device_empty({n, row}, dtype);
      ct::poison(out);
      attention_dense_with(kernel, dq, dk, dv, 1, heads, d, out, nullptr);
      EXPECT_TRUE(ct::close_on_rows(ct::download(out), expected, ct::all_rows(n), heads, d, ct::bound_for(dtype),
                                    fmt::format("{} {} needle", attention_kernel_name(kernel), dtype_name(dtype))));
    }
  }
}

TEST(CudaAttentionDense, RejectsBadArguments) {
  LB_REQUIRE_GPU();
  const Tensor a = ct::device_empty({10, 64}, DType::BF16);
  const Tensor f = ct::device_empty({10, 64}, DType::F32);
  Tensor out = ct::device_empty({10, 64}, DType::BF16);
  EXPECT_THROW(attention_dense(a, a, f, 1, 1, 64, out, nullptr), Error);                    // mixed dtypes
  EXPECT_THROW(attention_dense(a, a, a, 3, 1, 64, out, nullptr), Error);                    // 10 rows in 3 groups
  EXPECT_THROW(attention_dense(a, a, a, 1, 1, 64, const_cast<Tensor&>(a), nullptr), Error);  // out aliases q
  EXPECT_THROW(attention_dense_with(AttentionKernel::Mma, f, f, f, 1, 1, 64, const_cast<Tensor&>(f), nullptr),
               Error);                                                                      // mma needs bf16
  const Tensor host = Tensor::empty({10, 64});
  EXPECT_THROW(attention_dense(host, a, a, 1, 1, 64, out, nullptr), Error);                 // q on the cpu
  const Tensor big = ct::device_empty({2, 512}, DType::F32);
  Tensor big_out = ct::device_empty({2, 512}, DType::F32);
  EXPECT_THROW(attention_dense(big, big, big, 1, 1, 512, big_out, nullptr), Error);         // head_dim > 256
}

// Shapes for the Hopper kernels: tiny and odd groups, one frame, 8 frames;
// and groups of at least kWsKeysForThreeConsumers keys, where wgmma-ws
// takes its three-consumer shape (192 queries per CTA): 2130 = 11 x 192 +
// 18 leaves one active consumer in each group's last tile, 2240 = 11 x 192 +
// 128 two.
const DenseCase kHopperCases[] = {DenseCase{1, 1, 1, 64, DType::BF16},    DenseCase{3, 37, 2, 64, DType::BF16},
                                  DenseCase{2, 129, 2, 64, DType::BF16},  DenseCase{1, 978, 16, 64, DType::BF16},
                                  DenseCase{8, 978, 16, 64, DType::BF16}, DenseCase{2, 2130, 3, 64, DType::BF16},
                                  DenseCase{1, 2240, 2, 64, DType::BF16}};

// The warp-specialised sm_90a kernel (attention_wgmma_ws.cu), on Hopper only.
TEST(CudaAttentionWgmmaWs, DenseShapes) {
  LB_REQUIRE_GPU();
  if (!ct::hopper()) GTEST_SKIP() << "the wgmma-ws kernel runs on Hopper (sm_90) only";
  std::mt19937 rng(405);
  for (const DenseCase& c : kHopperCases) {
    run_case(c, rng, AttentionKernel::WgmmaWs);
  }
}
