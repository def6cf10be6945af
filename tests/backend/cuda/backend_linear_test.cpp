// CUDA backend: linear and linear_residual (cuBLASLt, and the float32
// weight-streaming kernel for a few rows) against the CPU
// backend, at the model's shapes (aggregator N = 978 and 8 x 978 tokens of
// 1024 channels in bfloat16; camera head 2048 channels and DPT projections
// in float32, TF32 and full float32) and at small odd shapes, including
// pointers that are not 16-byte aligned.
#include "backend_test_support.h"

#include "backend/cuda/gemm.h"

#include <cmath>
#include <numbers>

namespace lingbot::cuda::backend_test {
namespace {

struct LinearCase {
  const char* name;
  int64_t n, k, m;   // x [n, k], w [m, k], out [n, m]
  DType dtype;       // of x and w
  DType out_dtype;
  bool bias;
  Activation act;
  bool fp32 = false;        // full float32 backend (no TF32)
  bool misaligned = false;  // x and out start one row into a larger tensor
};

double bound_for(const LinearCase& c) {
  if (c.out_dtype == DType::BF16) return kBf16Bound;
  if (c.dtype == DType::BF16) return kFp32Bound;  // bf16 products are exact in float32; float32 sums
  return c.fp32 ? kFp32Bound : kTf32Bound;
}

// A view of rows [1, 1 + rows) of a new GPU tensor [rows + 1, cols]: with an
// odd row length its start is only 2- or 4-byte aligned.
Tensor offset_view(const Tensor& data, DType dtype, bool misaligned) {
  if (!misaligned) return to_gpu(data, dtype);
  const int64_t rows = data.dim(0), cols = data.numel() / rows;
  Tensor padded = Tensor::empty({rows + 1, cols});
  std::fill(padded.f32(), padded.f32() + cols, 0.0f);
  std::copy_n(data.f32(), data.numel(), padded.f32() + cols);
  return to_gpu(padded, dtype).slice(1, rows);
}

// be: the backend to check, else the test's TF32 or full float32 one (c.fp32).
void check_linear(const LinearCase& c, uint64_t seed, CudaBackend* backend = nullptr) {
  CudaBackend& be = backend ? *backend : c.fp32 ? gpu_fp32() : gpu();
  // Weights scaled like a trained layer's (output variance ~1) so that the
  // bias is of the same size as the product and a lost bias shows.
  const float w_scale = std::sqrt(3.0f / static_cast<float>(c.k));
  const Tensor x = representable(random_host({c.n, c.k}, seed), c.dtype);
  const Tensor w = representable(random_host({c.m, c.k}, seed + 1, -w_scale, w_scale), c.dtype);
  const Tensor b = random_host({c.m}, seed + 2);

  Tensor expected = cpu_poisoned({c.n, c.m});
  cpu().linear(x, w, c.bias ? &b : nullptr, expected, c.act);

  const Tensor gx = offset_view(x, c.dtype, c.misaligned);
  const Tensor gw = to_gpu(w, c.dtype);
  const Tensor gb = to_gpu(b, DType::F32);
  Tensor out = c.misaligned ? offset_view(cpu_poisoned({c.n, c.m}), c.out_dtype, true)  // NaN too
                            : poisoned({c.n, c.m}, c.out_dtype);
  be.linear(gx, gw, c.bias ? &gb : nullptr, out, c.act);
  EXPECT_TRUE(matches(out, expected, bound_for(c), c.name));
}

const LinearCase kLinearCases[] = {
    // Aggregator and encoder, bfloat16: qkv, fc1 (GELU), patch embedding, one frame and the scale phase.
    {"qkv 978x1024->3072 bf16", 978, 1024, 3072, DType::BF16, DType::BF16, true, Activation::None},
    {"fc1 978x1024->4096 bf16 gelu", 978, 1024, 4096, DType::BF16, DType::BF16, true, Activation::Gelu},
    {"qkv 7824x1024->3072 bf16", 7824, 1024, 3072, DType::BF16, DType::BF16, true, Activation::None},
    {"fc1 7824x1024->4096 bf16 gelu", 7824, 1024, 4096, DType::BF16, DType::BF16, true, Activation::Gelu},
    {"patch embed 1944x588->1024 bf16", 1944, 588, 1024, DType::BF16, DType::BF16, true, Activation::None},
    {"bf16 in, f32 out 978x1024->256", 978, 1024, 256, DType::BF16, DType::F32, true, Activation::None},
    {"bf16 no bias 978x1024->1024", 978, 1024, 1024, DType::BF16, DType::BF16, false, Activation::None},
    {"bf16 odd 5x3->7", 5, 3, 7, DType::BF16, DType::BF16, true, Activation::None},
    {"bf16 odd misaligned 33x9->17 relu", 33, 9, 17, DType::BF16, DType::BF16, true, Activation::Relu, false, true},
    // Camera head, float32 (TF32 and full float32).
    {"camera embed_pose 8x9->2048 tf32", 8, 9, 2048, DType::F32, DType::F32, true, Activation::None},
    {"camera embed_pose 8x9->2048 fp32", 8, 9, 2048, DType::F32, DType::F32, true, Activation::None, true},
    {"camera modulation 8x2048->6144 tf32", 8, 2048, 6144, DType::F32, DType::F32, true, Activation::None},
    {"camera fc1 8x2048->8192 gelu tf32", 8, 2048, 8192, DType::F32, DType::F32, true, Activation::Gelu},
    {"camera fc1 8x2048->8192 gelu fp32", 8, 2048, 8192, DType::F32, DType::F32, true, Activation::Gelu, true},
    {"camera pose fc1 1x2048->1024 gelu fp32", 1, 2048, 1024, DType::F32, DType::F32, true, Activation::Gelu, true},
    {"camera pose fc2 8x1024->9 fp32", 8, 1024, 9, DType::F32, DType::F32, true, Activation::None, true},
    // Float32 with at most kernels::kGemvMaxRows rows go through the
    // weight-streaming kernel (gemv.cu): every row count, the camera head's
    // streaming shapes, a k that is not a multiple of 4 (scalar path), a
    // k4 = 257 tail after the unrolled loop, and 9 rows (cuBLASLt again).
    {"camera qkv 1x2048->6144 fp32", 1, 2048, 6144, DType::F32, DType::F32, true, Activation::None, true},
    {"camera fc2 1x8192->2048 fp32", 1, 8192, 2048, DType::F32, DType::F32, true, Activation::None, true},
    {"camera proj 1x2048->2048 tf32 backend", 1, 2048, 2048, DType::F32, DType::F32, false, Activation::None},
    {"f32 2x1028->33 gemv tail", 2, 1028, 33, DType::F32, DType::F32, true, Activation::None, true},
    {"f32 3x4102->17 gemv scalar", 3, 4102, 17, DType::F32, DType::F32, true, Activation::Relu, true},
    {"f32 4x512->100 gemv", 4, 512, 100, DType::F32, DType::F32, false, Activation::None, true},
    {"f32 5x7->64 gemv misaligned", 5, 7, 64, DType::F32, DType::F32, true, Activation::Gelu, true, true},
    {"f32 6x256->1 gemv", 6, 256, 1, DType::F32, DType::F32, true, Activation::None, true},
    {"f32 9x2048->100 cublaslt", 9, 2048, 100, DType::F32, DType::F32, true, Activation::None, true},
    // DPT projections, float32.
    {"dpt project 7776x2048->256 tf32", 7776, 2048, 256, DType::F32, DType::F32, true, Activation::None},
    {"dpt project 972x2048->1024 tf32", 972, 2048, 1024, DType::F32, DType::F32, true, Activation::None},
    {"dpt project 972x2048->512 fp32", 972, 2048, 512, DType::F32, DType::F32, true, Activation::None, true},
    // Small and odd.
    {"f32 1x1->1", 1, 1, 1, DType::F32, DType::F32, true, Activation::None, true},
    {"f32 odd misaligned 7x5->3 gelu", 7, 5, 3, DType::F32, DType::F32, true, Activation::Gelu, true, true},
    {"f32 1000x3->1 tf32", 1000, 3, 1, DType::F32, DType::F32, false, Activation::Relu},
};

TEST(CudaBackendLinear, MatchesCpuAtModelAndOddShapes) {
  LB_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 100;
  for (const LinearCase& c : kLinearCases) {
    SCOPED_TRACE(c.name);
    check_linear(c, seed += 10);
  }
}

// A float32 bias reaches a bfloat16 output either fused as float32 or first
// rounded to bfloat16 (Gemm::BiasPath); the first is chosen when cuBLASLt
// has an algorithm for it. Both must be right.
TEST(CudaBackendLinear, BothBiasPathsForBfloat16Outputs) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Restore {
    ~Restore() { gpu().gemm().set_bias_path(Gemm::BiasPath::Auto); }
  } restore;
  for (Gemm::BiasPath path : {Gemm::BiasPath::Auto, Gemm::BiasPath::RoundToBf16}) {
    gpu().gemm().set_bias_path(path);
    SCOPED_TRACE(path == Gemm::BiasPath::Auto ? "auto" : "bias rounded to bf16");
    check_linear({"qkv 978x1024->3072", 978, 1024, 3072, DType::BF16, DType::BF16, true, Activation::None}, 7);
    check_linear({"odd misaligned 33x9->17", 33, 9, 17, DType::BF16, DType::BF16, true, Activation::Gelu, false, true},
                 8);
  }
}

// nn.GELU() is 0.5 x (1 + erf(x / sqrt 2)), not the tanh approximation that
// cuBLASLt's GELU epilogues compute; the two differ by up to ~5e-4 here.
TEST(CudaBackendLinear, GeluIsTheErfForm) {
  LB_REQUIRE_CUDA_DEVICE();
  const int64_t n = 4001;
  Tensor x = Tensor::empty({n, 1});
  for (int64_t i = 0; i < n; ++i) x.f32()[i] = -5.0f + 10.0f * static_cast<float>(i) / static_cast<float>(n - 1);
  const Tensor one = Tensor::from_vector({1.0f}, {1, 1});
  Tensor expected = Tensor::empty({n, 1});
  double tanh_gap = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x.f32()[i];
    expected.f32()[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    const double approx = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    tanh_gap = std::max(tanh_gap, std::fabs(approx - expected.f32()[i]));
  }
  ASSERT_GT(tanh_gap, 1e-4) << "the test must be able to tell the two forms apart";
  Tensor out = poisoned({n, 1}, DType::F32);
  gpu_fp32().linear(to_gpu(x, DType::F32), to_gpu(one, DType::F32), nullptr, out, Activation::Gelu);
  const Tensor got = gpu().download(out);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, static_cast<double>(std::fabs(got.f32()[i] - expected.f32()[i])));
  EXPECT_LT(worst, 2e-6) << "largest difference from the erf GELU; the tanh form would differ by " << tanh_gap;
}

struct ResidualCase {
  const char* name;
  int64_t n, k, m;
  DType dtype;  // of x, w and the residual
  bool bias, gamma;
  bool fp32 = false;
  bool misaligned = false;  // residual starts one row into a larger tensor
  bool f32_residual = false;  // a float32 residual stream under bf16 products (the model's blocks)
};

const ResidualCase kResidualCases[] = {
    {"attn proj 978x1024->1024 bf16", 978, 1024, 1024, DType::BF16, true, true},
    {"fc2 978x4096->1024 bf16", 978, 4096, 1024, DType::BF16, true, true},
    {"proj 978x1024->1024 bf16 no gamma", 978, 1024, 1024, DType::BF16, true, false},
    {"proj 64x1024->1024 f32 no bias tf32", 64, 1024, 1024, DType::F32, false, true},
    {"fc2 7824x4096->1024 bf16", 7824, 4096, 1024, DType::BF16, true, true},
    {"camera proj 8x2048->2048 tf32", 8, 2048, 2048, DType::F32, true, true},
    {"camera fc2 8x8192->2048 fp32", 8, 8192, 2048, DType::F32, true, true, true},
    {"camera fc2 1x8192->2048 fp32", 1, 8192, 2048, DType::F32, true, true, true},
    {"odd 5x7->3 fp32 no bias no gamma", 5, 7, 3, DType::F32, false, false, true},
    {"odd 3x9->5 bf16 gamma only misaligned", 3, 9, 5, DType::BF16, false, true, false, true},
    // No gain and a float32 residual: the product accumulates into the
    // residual in cuBLASLt's epilogue (the transformer blocks' updates).
    {"proj 978x1024->1024 bf16 += f32 residual", 978, 1024, 1024, DType::BF16, true, false, false, false, true},
    {"fc2 978x4096->1024 bf16 += f32 residual", 978, 4096, 1024, DType::BF16, true, false, false, false, true},
    {"fc2 7824x4096->1024 bf16 += f32 residual", 7824, 4096, 1024, DType::BF16, true, false, false, false, true},
    {"odd 3x9->5 bf16 += f32 residual misaligned, no bias", 3, 9, 5, DType::BF16, false, false, false, true, true},
    {"proj 1x1024->1024 bf16 += f32 residual", 1, 1024, 1024, DType::BF16, true, false, false, false, true},
    {"proj 64x1024->1024 tf32 += f32 residual", 64, 1024, 1024, DType::F32, true, false},
};

void check_linear_residual(const ResidualCase& c, uint64_t seed, CudaBackend* backend = nullptr) {
  CudaBackend& be = backend ? *backend : c.fp32 ? gpu_fp32() : gpu();
  const float w_scale = std::sqrt(3.0f / static_cast<float>(c.k));
  const Tensor x = representable(random_host({c.n, c.k}, seed), c.dtype);
  const Tensor w = representable(random_host({c.m, c.k}, seed + 1, -w_scale, w_scale), c.dtype);
  const Tensor b = random_host({c.m}, seed + 2);
  const Tensor g = random_host({c.m}, seed + 3, 0.25f, 2.0f);
  const DType residual_dtype = c.f32_residual ? DType::F32 : c.dtype;
  const Tensor residual = representable(random_host({c.n, c.m}, seed + 4), residual_dtype);

  Tensor expected = residual.clone();
  cpu().linear_residual(x, w, c.bias ? &b : nullptr, c.gamma ? &g : nullptr, expected);

  const Tensor gb = to_gpu(b, DType::F32), gg = to_gpu(g, DType::F32);
  Tensor gres = offset_view(residual, residual_dtype, c.misaligned);
  be.linear_residual(to_gpu(x, c.dtype), to_gpu(w, c.dtype), c.bias ? &gb : nullptr, c.gamma ? &gg : nullptr, gres);
  // bf16 inputs into a float32 residual: the inputs are exact in bf16 and
  // nothing is rounded to bf16, so only float32 summation order remains
  // (a bf16 rounding anywhere would exceed the bound 100-fold).
  const double bound = c.dtype == DType::BF16 ? (c.f32_residual ? kFp32Bound : kBf16Bound)
                                              : (c.fp32 ? kFp32Bound : kTf32Bound);
  EXPECT_TRUE(matches(gres, expected, bound, c.name));
}

TEST(CudaBackendLinear, LinearResidualMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 500;
  for (const ResidualCase& c : kResidualCases) {
    SCOPED_TRACE(c.name);
    check_linear_residual(c, seed += 10);
  }
}

// With GemmAlgorithm::Measured the candidates are timed on the call's own
// operands before the real call. The products must be the same as ever:
// above all an update residual += product, which a trial run into the
// residual itself would apply more than once.
TEST(CudaBackendLinear, MeasuredAlgorithmsGiveTheSameProducts) {
  LB_REQUIRE_CUDA_DEVICE();
  CudaBackendOptions o;
  o.sync_after_each_op = true;
  o.gemm_algorithm = GemmAlgorithm::Measured;
  static CudaBackend* measured = new CudaBackend(o);  // never destroyed, as gpu()
  o.allow_tf32 = false;
  static CudaBackend* measured_fp32 = new CudaBackend(o);
  uint64_t seed = 900;
  for (const LinearCase& c : kLinearCases) {
    SCOPED_TRACE(c.name);
    check_linear(c, seed += 10, c.fp32 ? measured_fp32 : measured);
  }
  for (const ResidualCase& c : kResidualCases) {
    SCOPED_TRACE(c.name);
    check_linear_residual(c, seed += 10, c.fp32 ? measured_fp32 : measured);
  }
  // The model's shapes offer several candidates each, so at least those were timed.
  EXPECT_GE(measured->gemm().measured_plan_count(), 8u);
  EXPECT_EQ(gpu().gemm().measured_plan_count(), 0u) << "the default is cuBLASLt's heuristic";
}

// Plans are made once per problem and reused: the second call of a shape
// adds none, a new shape adds one.
TEST(CudaBackendLinear, CachesOnePlanPerProblem) {
  LB_REQUIRE_CUDA_DEVICE();
  const Tensor x = to_gpu(random_host({13, 64}, 1), DType::BF16);
  const Tensor w = to_gpu(random_host({40, 64}, 2), DType::BF16);
  Tensor out = gpu().alloc({13, 40}, DType::BF16);
  gpu().linear(x, w, nullptr, out, Activation::None);
  const size_t plans = gpu().gemm().plan_count();
  for (int i = 0; i < 3; ++i) gpu().linear(x, w, nullptr, out, Activation::None);
  EXPECT_EQ(gpu().gemm().plan_count(), plans);
  const Tensor w2 = to_gpu(random_host({41, 64}, 3), DType::BF16);
  Tensor out2 = gpu().alloc({13, 41}, DType::BF16);
  gpu().linear(x, w2, nullptr, out2, Activation::None);
  EXPECT_EQ(gpu().gemm().plan_count(), plans + 1);
}

}  // namespace
}  // namespace lingbot::cuda::backend_test
