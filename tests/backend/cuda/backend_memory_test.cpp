// CUDA backend: identification, transfers with dtype conversion, fill,
// convert, and argument errors. Conversions must match the host's
// (core/half.h, round to nearest even) bit for bit.
#include "backend_test_support.h"

#include "core/error.h"

#include <cmath>
#include <cstring>

namespace lingbot::cuda::backend_test {
namespace {

const DType kFloatTypes[] = {DType::F32, DType::BF16, DType::F16};

TEST(CudaBackendMemory, IdentifiesItself) {
  LB_REQUIRE_CUDA_DEVICE();
  EXPECT_EQ(gpu().device(), Device::CUDA);
  EXPECT_EQ(gpu().compute_dtype(), DType::BF16);
  EXPECT_EQ(gpu().name().rfind("cuda (", 0), 0u) << gpu().name();
  EXPECT_NE(gpu().stream(), nullptr) << "ops must run on a stream of their own";
  EXPECT_NE(gpu().cublaslt_handle(), nullptr);
}

// host (as `from`) -> upload as `to` -> download: the values of the host
// conversion chain float32 -> from -> to -> float32, exactly.
TEST(CudaBackendMemory, UploadAndDownloadConvertLikeTheHost) {
  LB_REQUIRE_CUDA_DEVICE();
  // Values spread over many binades, including ones that round differently in bf16 and f16.
  Tensor values = random_host({3, 1001}, 1, -60000.0f, 60000.0f);  // float16 tops out at 65504
  const Tensor small = random_host({1001}, 2, -1e-3f, 1e-3f);
  std::memcpy(values.f32() + 1001, small.f32(), small.nbytes());
  for (DType from : kFloatTypes) {
    const Tensor host = values.to_dtype(from);
    for (DType to : kFloatTypes) {
      const Tensor expected = host.to_dtype(to).to_dtype(DType::F32);
      const Tensor dev = gpu().upload(host, to);
      EXPECT_EQ(dev.device(), Device::CUDA);
      EXPECT_EQ(dev.dtype(), to);
      EXPECT_EQ(dev.shape(), host.shape());
      EXPECT_TRUE(matches(dev, expected, kExactBound,
                          fmt::format("upload {} as {}", dtype_name(from), dtype_name(to))));
    }
  }
}

TEST(CudaBackendMemory, UploadIntoConvertsAndKeepsEachCopysData) {
  LB_REQUIRE_CUDA_DEVICE();
  // Two uploads into one tensor without waiting in between, with a device
  // copy of the first between them, on a backend that does not synchronise
  // after each op and whose stream is kept busy for milliseconds first: the
  // second upload must not overwrite the staging buffer before the first
  // copy has read it.
  CudaBackend async;
  const Tensor a = random_host({64, 333}, 3);
  const Tensor b = random_host({64, 333}, 4);
  Tensor dev = async.alloc({64, 333}, DType::BF16);
  Tensor kept = async.alloc({64, 333}, DType::BF16);
  Tensor busy = async.alloc({int64_t{256} << 20}, DType::F32);  // 1 GiB
  for (int i = 0; i < 20; ++i) async.fill(busy, static_cast<float>(i));
  async.upload_into(a, dev);
  async.copy_rows(dev, kept, {1, 64, 333, 0, 0, 0, 0});
  async.upload_into(b, dev);
  async.synchronize();
  EXPECT_TRUE(matches(kept, representable(a, DType::BF16), kExactBound, "first upload_into"));
  EXPECT_TRUE(matches(dev, representable(b, DType::BF16), kExactBound, "second upload_into"));

  // Same dtype, float32 (the frames and RoPE tables of every step).
  Tensor frames = poisoned({2, 3, 14, 28}, DType::F32);
  const Tensor host = random_host({2, 3, 14, 28}, 5, 0.0f, 1.0f);
  gpu().upload_into(host, frames);
  EXPECT_TRUE(matches(frames, host, kExactBound, "upload_into float32"));
}

TEST(CudaBackendMemory, DownloadsIntegerTensors) {
  LB_REQUIRE_CUDA_DEVICE();
  Tensor ints = Tensor::empty({5}, DType::I32);
  for (int i = 0; i < 5; ++i) ints.data_as<int32_t>()[i] = i * 1000 - 2000;
  const Tensor dev = gpu().upload(ints, DType::I32);
  const Tensor back = gpu().download(dev);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back.f32()[i], static_cast<float>(i * 1000 - 2000));
}

TEST(CudaBackendMemory, FillWritesEveryElement) {
  LB_REQUIRE_CUDA_DEVICE();
  for (DType t : kFloatTypes) {
    for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{978 * 1024}}) {
      Tensor dev = gpu().alloc({n}, t);
      gpu().fill(dev, 0.1f);
      Tensor expected = Tensor::empty({n});
      std::fill(expected.f32(), expected.f32() + n, 0.1f);
      EXPECT_TRUE(matches(dev, representable(expected, t), kExactBound,
                          fmt::format("fill {} x {}", n, dtype_name(t))));
      gpu().fill(dev, std::numeric_limits<float>::quiet_NaN());
      const Tensor back = gpu().download(dev);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isnan(back.f32()[i])) << dtype_name(t) << " element " << i;
    }
  }
}

TEST(CudaBackendMemory, ConvertBetweenAllFloatTypes) {
  LB_REQUIRE_CUDA_DEVICE();
  const Tensor values = random_host({978, 33}, 6, -300.0f, 300.0f);
  for (DType from : kFloatTypes) {
    const Tensor src_host = values.to_dtype(from);
    const Tensor src = gpu().upload(src_host, from);
    for (DType to : kFloatTypes) {
      Tensor dst = poisoned({978, 33}, to);
      gpu().convert(src, dst);
      EXPECT_TRUE(matches(dst, src_host.to_dtype(to).to_dtype(DType::F32), kExactBound,
                          fmt::format("convert {} -> {}", dtype_name(from), dtype_name(to))));
    }
  }
}

TEST(CudaBackendMemory, RejectsBadArgumentsWithAnError) {
  LB_REQUIRE_CUDA_DEVICE();
  Tensor dev = gpu().alloc({4, 8}, DType::F32);
  const Tensor host = random_host({4, 9}, 7);
  EXPECT_THROW(gpu().upload_into(host, dev), Error);          // shape
  EXPECT_THROW(gpu().upload_into(dev, dev), Error);           // not a host tensor
  Tensor host_out = Tensor::empty({4, 8});
  EXPECT_THROW(gpu().relu(dev, host_out), Error);             // output on the host
  // A bfloat16 weight under a float32 x is allowed (camera_head_weights
  // bf16); a float32 weight under a bfloat16 x is not.
  const Tensor dev_bf16 = gpu().alloc({4, 8}, DType::BF16);
  const Tensor w = gpu().alloc({8, 8}, DType::F32);
  Tensor out = gpu().alloc({4, 8}, DType::F32);
  EXPECT_THROW(gpu().linear(dev_bf16, w, nullptr, out, Activation::None), Error);  // dtypes differ
  const Tensor w_f32 = gpu().alloc({8, 7}, DType::F32);
  EXPECT_THROW(gpu().linear(dev, w_f32, nullptr, out, Activation::None), Error);  // K mismatch
  Tensor i32 = gpu().alloc({4}, DType::I32);
  EXPECT_THROW(gpu().fill(i32, 1.0f), Error);
  gpu().synchronize();  // the backend is still usable after the errors
}

}  // namespace
}  // namespace lingbot::cuda::backend_test
