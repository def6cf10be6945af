#include "backend/cuda/kv/tensor_map.h"

#include "core/error.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstring>

namespace lingbot::cuda {

namespace {

static_assert(sizeof(TensorMap) == sizeof(CUtensorMap));

// The driver's encoder, looked up once through the runtime (no link
// against libcuda); null where the driver does not have it.
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return PFN_cuTensorMapEncodeTiled_v12000{nullptr};
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

std::optional<TensorMap> kv_chunk_tensor_map(const KvChunkGeometry& chunk, int box_rows) {
  constexpr int kHeadDim = 64;  // one 128-byte row: the 128-byte swizzle's width
  if (chunk.head_dim != kHeadDim || chunk.page_size < box_rows || box_rows > 256 || chunk.kv_pages <= 0) {
    return std::nullopt;
  }
  const auto encode = encoder();
  if (!encode) return std::nullopt;
  constexpr int64_t kElem = 2;  // bf16
  const int64_t row_bytes = int64_t{chunk.num_heads} * kHeadDim * kElem;
  const cuuint64_t dims[4] = {kHeadDim, static_cast<cuuint64_t>(chunk.num_heads),
                              static_cast<cuuint64_t>(chunk.page_size), static_cast<cuuint64_t>(chunk.kv_pages)};
  const cuuint64_t strides[3] = {kHeadDim * kElem, static_cast<cuuint64_t>(row_bytes),
                                 static_cast<cuuint64_t>(row_bytes * chunk.page_size)};
  const cuuint32_t box[4] = {kHeadDim, 1, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(chunk.base), dims, strides,
                            box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  LB_CHECK(r == CUDA_SUCCESS, "cuda backend: kv cache tensor map: cuTensorMapEncodeTiled failed (error {}) for "
           "{} pages of {} slots x {} heads", static_cast<int>(r), chunk.kv_pages, chunk.page_size, chunk.num_heads);
  TensorMap out;
  std::memcpy(out.bytes, &map, sizeof(map));
  return out;
}

}  // namespace lingbot::cuda
