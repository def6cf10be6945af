// CUDA backend: patch extraction, token -> NCHW layout, convolutions (cuDNN),
// transposed convolutions and bilinear resizing against the CPU backend, at
// the DPT head's shapes for a 378 x 504 input (patch grid 27 x 36; pyramid
// levels 108 x 144, 54 x 72, 27 x 36, 14 x 18; fusion up to 216 x 288; output
// convolutions at 378 x 504) and at small odd shapes.
#include "backend_test_support.h"

#include "backend/cuda/conv.h"
#include "backend/naive_ops.h"

#include <cmath>

namespace lingbot::cuda::backend_test {
namespace {

constexpr std::array<float, 3> kMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kStd = {0.229f, 0.224f, 0.225f};

TEST(CudaBackendImage, PatchifyMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    Shape images;
    int patch;
    DType dtype;
  };
  const Case cases[] = {
      {"2 frames 378x504 p14 bf16", {2, 3, 378, 504}, 14, DType::BF16},
      {"1 frame 378x504 p14 f32", {1, 3, 378, 504}, 14, DType::F32},
      {"odd 3 frames 6x9 p3 f32", {3, 3, 6, 9}, 3, DType::F32},
  };
  uint64_t seed = 6000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor images = random_host(c.images, seed += 10, 0.0f, 1.0f);
    const int64_t rows = c.images[0] * (c.images[2] / c.patch) * (c.images[3] / c.patch);
    const int64_t cols = 3 * int64_t{c.patch} * c.patch;
    Tensor expected = cpu_poisoned({rows, cols});
    cpu().patchify(images, c.patch, kMean, kStd, expected);
    Tensor out = poisoned({rows, cols}, c.dtype);
    gpu().patchify(to_gpu(images, DType::F32), c.patch, kMean, kStd, out);
    // float32: the same subtraction and division, correctly rounded on both sides.
    EXPECT_TRUE(matches(out, expected, c.dtype == DType::BF16 ? kBf16Bound : 1e-6, c.name));
  }
}

TEST(CudaBackendImage, TokensToNchwIsExact) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    int64_t batches, h, w, c;
    DType dtype;
  };
  const Case cases[] = {
      {"dpt projection 2 x 27x36 x 1024 f32", 2, 27, 36, 1024, DType::F32},
      {"odd 3 x 5x7 x 33 bf16", 3, 5, 7, 33, DType::BF16},
      {"one position 2 x 1x1 x 40 f32", 2, 1, 1, 40, DType::F32},
  };
  uint64_t seed = 6500;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor tokens = representable(random_host({c.batches, c.h * c.w, c.c}, seed += 10), c.dtype);
    Tensor expected = cpu_poisoned({c.batches, c.c, c.h, c.w});
    cpu().tokens_to_nchw(tokens, static_cast<int>(c.h), static_cast<int>(c.w), expected);
    Tensor out = poisoned({c.batches, c.c, c.h, c.w}, c.dtype);
    gpu().tokens_to_nchw(to_gpu(tokens, c.dtype), static_cast<int>(c.h), static_cast<int>(c.w), out);
    EXPECT_TRUE(matches(out, expected, kExactBound, c.name));
  }
}

struct ConvCase {
  const char* name;
  Shape x;  // [n, cin, h, w]
  int64_t cout, k;
  int stride, pad;
  bool bias;
  bool fp32;  // full float32 (else TF32)
};

void check_conv(const ConvCase& c, uint64_t seed) {
  CudaBackend& be = c.fp32 ? gpu_fp32() : gpu();
  const int64_t cin = c.x[1];
  const int64_t oh = (c.x[2] + 2 * c.pad - c.k) / c.stride + 1, ow = (c.x[3] + 2 * c.pad - c.k) / c.stride + 1;
  const float w_scale = std::sqrt(3.0f / static_cast<float>(cin * c.k * c.k));
  const Tensor x = random_host(c.x, seed);
  const Tensor w = random_host({c.cout, cin, c.k, c.k}, seed + 1, -w_scale, w_scale);
  const Tensor b = random_host({c.cout}, seed + 2);
  Tensor expected = cpu_poisoned({c.x[0], c.cout, oh, ow});
  cpu().conv2d(x, w, c.bias ? &b : nullptr, c.stride, c.pad, expected);
  const Tensor gb = to_gpu(b, DType::F32);
  Tensor out = poisoned({c.x[0], c.cout, oh, ow}, DType::F32);
  be.conv2d(to_gpu(x, DType::F32), to_gpu(w, DType::F32), c.bias ? &gb : nullptr, c.stride, c.pad, out);
  EXPECT_TRUE(matches(out, expected, c.fp32 ? kFp32Bound : kTf32Bound, c.name));
}

TEST(CudaBackendImage, Conv2dMatchesCpuAtDptShapes) {
  LB_REQUIRE_CUDA_DEVICE();
  const ConvCase cases[] = {
      {"layer1_rn 256@108x144 -> 256 3x3", {1, 256, 108, 144}, 256, 3, 1, 1, false, false},
      {"layer2_rn 512@54x72 -> 256 3x3", {1, 512, 54, 72}, 256, 3, 1, 1, false, false},
      {"layer3_rn 2 x 1024@27x36 -> 256 3x3", {2, 1024, 27, 36}, 256, 3, 1, 1, false, false},
      {"layer4_rn 1024@14x18 -> 256 3x3", {1, 1024, 14, 18}, 256, 3, 1, 1, false, false},
      {"resize_layers.3 1024@27x36 -> 1024 3x3 s2", {1, 1024, 27, 36}, 1024, 3, 2, 1, true, false},
      {"residual unit 256@108x144 3x3", {1, 256, 108, 144}, 256, 3, 1, 1, true, false},
      {"out_conv 256@216x288 1x1", {1, 256, 216, 288}, 256, 1, 1, 0, true, false},
      {"output_conv1 256@216x288 -> 128 3x3", {1, 256, 216, 288}, 128, 3, 1, 1, true, false},
      {"output_conv2.0 128@378x504 -> 32 3x3", {1, 128, 378, 504}, 32, 3, 1, 1, true, false},
      {"output_conv2.2 32@378x504 -> 2 1x1", {1, 32, 378, 504}, 2, 1, 1, 0, true, false},
      // Full float32.
      {"layer4_rn 1024@14x18 -> 256 3x3 fp32", {1, 1024, 14, 18}, 256, 3, 1, 1, false, true},
      {"output_conv2.2 2 x 32@378x504 -> 2 1x1 fp32", {2, 32, 378, 504}, 2, 1, 1, 0, true, true},
      // Odd.
      {"odd 2 x 3@7x5 -> 4 3x3 s2 fp32", {2, 3, 7, 5}, 4, 3, 2, 1, true, true},
      {"odd 5@4x4 -> 3 1x1 tf32", {1, 5, 4, 4}, 3, 1, 1, 0, false, false},
      {"odd 2@3x3 -> 1 3x3 no pad fp32", {1, 2, 3, 3}, 1, 3, 1, 0, true, true},
  };
  uint64_t seed = 7000;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    check_conv(c, seed += 10);
  }
}

// A backend whose convolutions time every cuDNN algorithm on a shape's first call.
CudaBackend& gpu_measured() {
  static CudaBackend* backend = [] {
    CudaBackendOptions o;
    o.sync_after_each_op = true;
    o.conv_algorithm = ConvAlgorithm::Measured;
    return new CudaBackend(o);
  }();
  return *backend;
}

struct NhwcConvCase {
  const char* name;
  Shape x;  // [n, cin, h, w], as the reference takes it
  int64_t cout, k;
  int stride, pad;
  DType maps;
};

// conv2d_nhwc on `be` against the CPU's NCHW conv2d (with a bias); returns
// how the shape's algorithm was chosen (Conv::describe_plan).
std::string check_conv_nhwc(CudaBackend& be, const NhwcConvCase& c, uint64_t seed) {
  const int64_t n = c.x[0], cin = c.x[1];
  const int64_t oh = (c.x[2] + 2 * c.pad - c.k) / c.stride + 1, ow = (c.x[3] + 2 * c.pad - c.k) / c.stride + 1;
  const float w_scale = std::sqrt(3.0f / static_cast<float>(cin * c.k * c.k));
  // Inputs the maps' dtype holds exactly, so that the reference sees what the GPU does.
  const Tensor x = representable(random_host(c.x, seed), c.maps);
  const Tensor w = representable(random_host({c.cout, cin, c.k, c.k}, seed + 1, -w_scale, w_scale), c.maps);
  const Tensor b = random_host({c.cout}, seed + 2);
  Tensor expected = cpu_poisoned({n, c.cout, oh, ow});
  cpu().conv2d(x, w, &b, c.stride, c.pad, expected);
  const Tensor gb = to_gpu(b, DType::F32);
  Tensor out = poisoned({n, oh, ow, c.cout}, c.maps);
  be.conv2d_nhwc(to_gpu(test::naive::channels_last(x), c.maps), to_gpu(test::naive::channels_last(w), c.maps), &gb, c.stride, c.pad, out);
  EXPECT_TRUE(matches(out, test::naive::channels_last(expected), c.maps == DType::BF16 ? kBf16Bound : kTf32Bound, c.name));
  const ConvShape shape{.batches = n, .in_channels = cin, .height = c.x[2], .width = c.x[3], .out_channels = c.cout,
                        .kernel = c.k, .stride = c.stride, .pad = c.pad, .channels_last = true,
                        .bf16 = c.maps == DType::BF16};
  return be.conv().describe_plan(shape);
}

TEST(CudaBackendImage, Conv2dWithMeasuredAlgorithmsMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  const NhwcConvCase cases[] = {
      {"residual unit 256@108x144 3x3 tf32", {1, 256, 108, 144}, 256, 3, 1, 1, DType::F32},
      {"residual unit 256@108x144 3x3 bf16", {1, 256, 108, 144}, 256, 3, 1, 1, DType::BF16},
      {"output_conv2.0 128@378x504 -> 32 3x3 bf16", {1, 128, 378, 504}, 32, 3, 1, 1, DType::BF16},
      {"resize_layers.3 1024@27x36 -> 1024 3x3 s2 tf32", {1, 1024, 27, 36}, 1024, 3, 2, 1, DType::F32},
      {"out_conv 2 x 256@54x72 1x1 bf16", {2, 256, 54, 72}, 256, 1, 1, 0, DType::BF16},
      {"odd 2 x 3@7x5 -> 4 3x3 s2 bf16", {2, 3, 7, 5}, 4, 3, 2, 1, DType::BF16},
  };
  uint64_t seed = 7500;
  for (const NhwcConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string measured = check_conv_nhwc(gpu_measured(), c, seed += 10);
    EXPECT_NE(measured.find("(measured "), std::string::npos) << measured;
    // The default backend chooses the same shape's algorithm by cuDNN's ranking.
    const std::string ranked = check_conv_nhwc(gpu(), c, seed);
    EXPECT_NE(ranked.find("(heuristic)"), std::string::npos) << ranked;
  }
}

TEST(CudaBackendImage, ConvTranspose2dMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    Shape x;
    int64_t cout;
    int k;
    bool bias, fp32;
  };
  const Case cases[] = {
      {"resize_layers.0 256@27x36 x4", {1, 256, 27, 36}, 256, 4, true, false},
      {"resize_layers.1 2 x 512@27x36 x2", {2, 512, 27, 36}, 512, 2, true, false},
      {"resize_layers.1 512@27x36 x2 fp32", {1, 512, 27, 36}, 512, 2, true, true},
      {"odd 2 x 3@2x3 -> 5 x3 no bias fp32", {2, 3, 2, 3}, 5, 3, false, true},
  };
  uint64_t seed = 7500;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CudaBackend& be = c.fp32 ? gpu_fp32() : gpu();
    const int64_t cin = c.x[1];
    const float w_scale = std::sqrt(3.0f / static_cast<float>(cin));
    const Tensor x = random_host(c.x, seed += 10);
    const Tensor w = random_host({cin, c.cout, c.k, c.k}, seed + 1, -w_scale, w_scale);
    const Tensor b = random_host({c.cout}, seed + 2);
    const Shape out_shape = {c.x[0], c.cout, c.x[2] * c.k, c.x[3] * c.k};
    Tensor expected = cpu_poisoned(out_shape);
    cpu().conv_transpose2d(x, w, c.bias ? &b : nullptr, c.k, expected);
    const Tensor gb = to_gpu(b, DType::F32);
    Tensor out = poisoned(out_shape, DType::F32);
    be.conv_transpose2d(to_gpu(x, DType::F32), to_gpu(w, DType::F32), c.bias ? &gb : nullptr, c.k, out);
    EXPECT_TRUE(matches(out, expected, c.fp32 ? kFp32Bound : kTf32Bound, c.name));
  }
}

TEST(CudaBackendImage, ResizeBilinearMatchesCpu) {
  LB_REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* name;
    Shape x;
    int64_t oh, ow;
  };
  const Case cases[] = {
      {"fuse4 256@14x18 -> 27x36", {1, 256, 14, 18}, 27, 36},
      {"fuse3 256@27x36 -> 54x72", {2, 256, 27, 36}, 54, 72},
      {"fuse2 256@54x72 -> 108x144", {1, 256, 54, 72}, 108, 144},
      {"fuse1 256@108x144 -> 216x288", {1, 256, 108, 144}, 216, 288},
      {"head 128@216x288 -> 378x504", {1, 128, 216, 288}, 378, 504},
      {"odd 1x1 -> 4x5", {2, 3, 1, 1}, 4, 5},
      {"odd 5x7 -> 1x1", {1, 2, 5, 7}, 1, 1},
      {"identity 3x4", {1, 1, 3, 4}, 3, 4},
      {"shrink 9x9 -> 4x4", {1, 2, 9, 9}, 4, 4},
  };
  uint64_t seed = 8000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = random_host(c.x, seed += 10);
    const Shape out_shape = {c.x[0], c.x[1], c.oh, c.ow};
    Tensor expected = cpu_poisoned(out_shape);
    cpu().resize_bilinear(x, expected);
    Tensor out = poisoned(out_shape, DType::F32);
    gpu().resize_bilinear(to_gpu(x, DType::F32), out);
    // The same float coordinates and weights; only fused multiply-adds may differ.
    EXPECT_TRUE(matches(out, expected, 1e-6, c.name));

    // With a tensor added in the same pass: one plane set repeated over the
    // batch (the DPT head's position embedding), against resize then add.
    const Tensor add = random_host({c.x[1], c.oh, c.ow}, seed + 1);
    Tensor expected_sum = expected.clone();
    cpu().add_broadcast(expected_sum, add);
    Tensor sum = poisoned(out_shape, DType::F32);
    const Tensor gpu_add = to_gpu(add, DType::F32);
    gpu().resize_bilinear(to_gpu(x, DType::F32), &gpu_add, sum);
    EXPECT_TRUE(matches(sum, expected_sum, 1e-6, std::string(c.name) + " + add"));
  }
}

}  // namespace
}  // namespace lingbot::cuda::backend_test
