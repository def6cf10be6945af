// CUDA backend: row copies, column concatenation and the element-wise ops
// against the CPU backend. Data movement must be bit-exact and must leave
// every element it is not asked to write untouched.
#include "backend_test_support.h"

namespace lingbot::cuda::backend_test {
namespace {

// The CPU backend computes in float32 only: run `op` on float32 host copies
// of the (already representable) inputs.
struct RowCopyCase {
  const char* name;
  Shape src, dst;
  RowCopy copy;
  DType dtype;
};

TEST(CudaBackendElementwise, CopyRowsWritesExactlyTheBlocks) {
  LB_REQUIRE_CUDA_DEVICE();
  const RowCopyCase cases[] = {
      // Patches of 8 frames into the aggregator's token matrix, after 6 specials per frame.
      {"patches into tokens bf16", {8 * 972, 1024}, {8 * 978, 1024}, {8, 972, 1024, 0, 972, 6, 978}, DType::BF16},
      // One special block broadcast to every frame (source stride 0).
      {"broadcast specials bf16", {6, 1024}, {8 * 978, 1024}, {8, 6, 1024, 0, 0, 0, 978}, DType::BF16},
      // The camera head's field-of-view columns 7, 8 of each pose row, as 1-element rows.
      {"fov columns f32", {8, 9}, {8, 2}, {8, 2, 1, 7, 9, 0, 2}, DType::F32},
      {"fov back f32", {8, 2}, {8, 9}, {8, 2, 1, 0, 2, 7, 9}, DType::F32},
      // A whole tensor as one column.
      {"flat copy f32", {2, 256, 27, 36}, {2, 256, 27, 36}, {1, 2 * 256 * 27 * 36, 1, 0, 0, 0, 0}, DType::F32},
      // Encoder patch rows out of [cls, 4 registers, patches] frames.
      {"patch rows out of frames bf16", {2 * 977, 1024}, {2 * 972, 1024}, {2, 972, 1024, 5, 977, 0, 972}, DType::BF16},
      // Odd sizes: 3-element bf16 rows (2-byte units), float16.
      {"odd bf16", {10, 3}, {12, 3}, {3, 2, 3, 1, 3, 2, 4}, DType::BF16},
      {"odd f16", {7, 5}, {7, 5}, {2, 3, 5, 0, 4, 1, 3}, DType::F16},
  };
  uint64_t seed = 3000;
  for (const RowCopyCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor src = representable(random_host(c.src, seed += 10), c.dtype);
    const Tensor dst = representable(random_host(c.dst, seed + 1), c.dtype);  // not NaN: untouched rows are checked too
    Tensor expected = dst.clone();
    cpu().copy_rows(src, expected, c.copy);
    Tensor gdst = to_gpu(dst, c.dtype);
    gpu().copy_rows(to_gpu(src, c.dtype), gdst, c.copy);
    EXPECT_TRUE(matches(gdst, expected, kExactBound, c.name));
  }
}

TEST(CudaBackendElementwise, CopyRowsRejectsOutOfRangeBlocks) {
  LB_REQUIRE_CUDA_DEVICE();
  const Tensor src = gpu().alloc({10, 4}, DType::F32);
  Tensor dst = gpu().alloc({10, 4}, DType::F32);
  EXPECT_THROW(gpu().copy_rows(src, dst, {2, 5, 4, 0, 5, 0, 6}), Error);   // second block ends at row 11
  EXPECT_THROW(gpu().copy_rows(src, dst, {1, 3, 4, 8, 0, 0, 0}), Error);   // source rows 8..10
  EXPECT_THROW(gpu().copy_rows(src, dst, {1, 2, 3, 0, 0, 0, 0}), Error);   // 40 elements are not rows of 3
}

TEST(CudaBackendElementwise, ConcatColsIsExact) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    int64_t n, ca, cb;
    DType dtype;
  };
  const Case cases[] = {
      {"frame | global 7824 x (1024 + 1024) bf16", 7824, 1024, 1024, DType::BF16},
      {"odd f32 5 x (3 + 7)", 5, 3, 7, DType::F32},
      {"odd bf16 3 x (5 + 3)", 3, 5, 3, DType::BF16},
  };
  uint64_t seed = 3500;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor a = representable(random_host({c.n, c.ca}, seed += 10), c.dtype);
    const Tensor b = representable(random_host({c.n, c.cb}, seed + 1), c.dtype);
    Tensor expected = cpu_poisoned({c.n, c.ca + c.cb});
    cpu().concat_cols(a, b, expected);
    Tensor out = poisoned({c.n, c.ca + c.cb}, c.dtype);
    gpu().concat_cols(to_gpu(a, c.dtype), to_gpu(b, c.dtype), out);
    EXPECT_TRUE(matches(out, expected, kExactBound, c.name));
  }
}

TEST(CudaBackendElementwise, AddBroadcastMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    Shape x, y;
    DType x_type, y_type;
  };
  const Case cases[] = {
      {"patch embedding + position bf16", {8 * 972, 1024}, {972, 1024}, DType::BF16, DType::BF16},
      {"dpt maps + position f32", {2, 256, 27, 36}, {256, 27, 36}, DType::F32, DType::F32},
      {"bf16 += f32", {4, 33}, {33}, DType::BF16, DType::F32},
      {"odd f32 += 1 element", {7, 3}, {1}, DType::F32, DType::F32},
  };
  uint64_t seed = 4000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = representable(random_host(c.x, seed += 10), c.x_type);
    const Tensor y = representable(random_host(c.y, seed + 1), c.y_type);
    Tensor expected = x.clone();
    cpu().add_broadcast(expected, y);
    Tensor gx = to_gpu(x, c.x_type);
    gpu().add_broadcast(gx, to_gpu(y, c.y_type));
    // float32: one addition, identical; bfloat16: one rounding of the sum.
    EXPECT_TRUE(matches(gx, expected, c.x_type == DType::BF16 ? kBf16Bound : kFp32Bound, c.name));
  }
}

// add, relu, silu on float32 (DPT, camera head) and bfloat16, out of place
// and in place (aliasing is allowed), at vector and odd lengths.
TEST(CudaBackendElementwise, AddReluSiluMatchCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    Shape shape;
    DType dtype;
    bool in_place;
    bool misaligned;  // operands start one element into a larger tensor
  };
  const Case cases[] = {
      {"dpt map f32", {2, 256, 108, 144}, DType::F32, false, false},
      {"dpt map f32 in place", {1, 256, 54, 72}, DType::F32, true, false},
      {"tokens bf16", {978, 1024}, DType::BF16, false, false},
      {"odd bf16 in place", {1001}, DType::BF16, true, false},
      {"odd f32 misaligned", {1003}, DType::F32, false, true},
  };
  uint64_t seed = 4500;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t n = shape_numel(c.shape);
    const Tensor a = representable(random_host(c.shape, seed += 10, -6.0f, 6.0f), c.dtype);
    const Tensor b = representable(random_host(c.shape, seed + 1, -6.0f, 6.0f), c.dtype);
    auto dev = [&](const Tensor& host) {
      if (!c.misaligned) return to_gpu(host, c.dtype);
      Tensor padded = Tensor::empty({n + 1});
      padded.f32()[0] = 0.0f;
      std::copy_n(host.f32(), n, padded.f32() + 1);
      return to_gpu(padded, c.dtype).slice(1, n).reshape(c.shape);
    };
    const double bound = c.dtype == DType::BF16 ? kBf16Bound : kFp32Bound;

    Tensor expected = cpu_poisoned(c.shape);
    cpu().add(a, b, expected);
    Tensor ga = dev(a);
    Tensor out = c.in_place ? ga : dev(cpu_poisoned(c.shape));
    gpu().add(ga, dev(b), out);
    EXPECT_TRUE(matches(out, expected, bound, std::string(c.name) + ": add"));

    cpu().relu(a, expected);
    ga = dev(a);
    out = c.in_place ? ga : dev(cpu_poisoned(c.shape));
    gpu().relu(ga, out);
    EXPECT_TRUE(matches(out, expected, kExactBound, std::string(c.name) + ": relu"));

    cpu().silu(a, expected);
    ga = dev(a);
    out = c.in_place ? ga : dev(cpu_poisoned(c.shape));
    gpu().silu(ga, out);
    EXPECT_TRUE(matches(out, expected, c.dtype == DType::BF16 ? kBf16Bound : 1e-6, std::string(c.name) + ": silu"));
  }
}

TEST(CudaBackendElementwise, AdalnModulateMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    int64_t n, c;
    DType dtype;
  };
  const Case cases[] = {{"camera head 8 x 2048 f32", 8, 2048, DType::F32}, {"odd 5 x 7 bf16", 5, 7, DType::BF16}};
  uint64_t seed = 5000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor xn = representable(random_host({c.n, c.c}, seed += 10), c.dtype);
    const Tensor mod = representable(random_host({c.n, 3 * c.c}, seed + 1), c.dtype);
    const Tensor res = representable(random_host({c.n, c.c}, seed + 2), c.dtype);
    Tensor expected = cpu_poisoned({c.n, c.c});
    cpu().adaln_modulate(xn, mod, res, expected);
    Tensor out = poisoned({c.n, c.c}, c.dtype);
    gpu().adaln_modulate(to_gpu(xn, c.dtype), to_gpu(mod, c.dtype), to_gpu(res, c.dtype), out);
    EXPECT_TRUE(matches(out, expected, c.dtype == DType::BF16 ? kBf16Bound : kFp32Bound, c.name));
  }
}

}  // namespace
}  // namespace lingbot::cuda::backend_test
