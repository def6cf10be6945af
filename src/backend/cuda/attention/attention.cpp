// Host side of the GPU attention (attention.h): argument checks, the choice
// of kernel and of the number of key splits. The kernels are in attention.cu
// and attention_mma.cu.
#include "backend/cuda/attention/attention.h"

#include "backend/cuda/attention/attention_launch.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lingbot::cuda {

namespace attn {

int resident_ctas_per_sm(OccupancyCache& cache, const void* kernel, int threads, size_t dynamic_smem_bytes) {
  int device = 0;
  LB_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cache.device) {
    int n = 0;
    LB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, dynamic_smem_bytes));
    cache.ctas = n > 0 ? n : 1;
    cache.device = device;
  }
  return cache.ctas;
}

}  // namespace attn

using attn::AttentionArgs;
using attn::DenseKeys;
using attn::PagedFp8Keys;
using attn::PagedKeys;
using bf16 = __nv_bfloat16;

namespace {

struct DeviceInfo {
  int sms = 0;
  int major = 0;
};

DeviceInfo device_info() {
  static thread_local int cached_device = -1;
  static thread_local DeviceInfo cached;
  int device = 0;
  LB_CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    LB_CUDA_CHECK(cudaDeviceGetAttribute(&cached.sms, cudaDevAttrMultiProcessorCount, device));
    LB_CUDA_CHECK(cudaDeviceGetAttribute(&cached.major, cudaDevAttrComputeCapabilityMajor, device));
    cached_device = device;
  }
  return cached;
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

void check_device_tensor(const Tensor& t, const char* what) {
  LB_CHECK(t.defined(), "cuda attention: {} is an undefined tensor", what);
  LB_CHECK(t.device() == Device::CUDA, "cuda attention: {} must be on the GPU, got {}", what, t.describe());
  LB_CHECK(t.dtype() == DType::BF16 || t.dtype() == DType::F32,
           "cuda attention: {} must be bfloat16 or float32, got {}", what, t.describe());
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data());
  const auto* pb = static_cast<const char*>(b.data());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

bool mma_applies(DType dtype, int head_dim) {
  return dtype == DType::BF16 && head_dim == 64 && device_info().major >= 8;
}

// Auto -> a concrete kernel; an explicit choice that cannot run is an error.
// The Mma kernel also needs 16-byte aligned K/V rows (cp.async) and 4-byte
// aligned q/out (paired bf16 accesses): `mma_aligned`. `auto_choice` is
// what Auto picks on Hopper where a tensor-core kernel applies (attention.h).
AttentionKernel resolve(AttentionKernel kernel, DType dtype, int head_dim, bool mma_aligned,
                        AttentionKernel auto_choice) {
  LB_CHECK(head_dim <= kAttentionMaxHeadDim, "cuda attention: head_dim {} is larger than the supported {}",
           head_dim, kAttentionMaxHeadDim);
  LB_CHECK(auto_choice == AttentionKernel::Auto || auto_choice == AttentionKernel::Mma ||
               auto_choice == AttentionKernel::WgmmaWs,
           "cuda attention: the kernel auto picks must be auto, mma or wgmma-ws, got {}",
           attention_kernel_name(auto_choice));
  if (kernel == AttentionKernel::Auto) {
    if (!(mma_applies(dtype, head_dim) && mma_aligned)) return AttentionKernel::Warp;
    if (device_info().major != 9) return AttentionKernel::Mma;
    return auto_choice == AttentionKernel::Auto ? AttentionKernel::WgmmaWs : auto_choice;
  }
  if (kernel == AttentionKernel::WgmmaWs) {
    LB_CHECK(dtype == DType::BF16 && head_dim == 64 && device_info().major == 9,
             "cuda attention: the {} kernel needs bfloat16, head_dim 64 and a Hopper GPU (sm_90), got {} with "
             "head_dim {} on sm_{}x", attention_kernel_name(kernel), dtype_name(dtype), head_dim,
             device_info().major);
    LB_CHECK(mma_aligned, "cuda attention: the {} kernel needs 16-byte aligned k/v and 4-byte aligned q/out",
             attention_kernel_name(kernel));
  }
  if (kernel == AttentionKernel::Mma) {
    LB_CHECK(mma_applies(dtype, head_dim),
             "cuda attention: the mma kernel needs bfloat16, head_dim 64 and sm_80+, got {} with head_dim {}",
             dtype_name(dtype), head_dim);
    LB_CHECK(mma_aligned, "cuda attention: the mma kernel needs 16-byte aligned k/v and 4-byte aligned q/out");
  }
  return kernel;
}

template <typename T>
AttentionArgs<T> make_args(const Tensor& q, Tensor& out, int32_t groups, int32_t rows, int num_heads,
                           int head_dim) {
  AttentionArgs<T> a;
  a.q = static_cast<const T*>(q.data());
  a.out = static_cast<T*>(out.data());
  a.groups = groups;
  a.rows = rows;
  a.num_heads = num_heads;
  a.head_dim = head_dim;
  a.scale_log2 = attn::kLog2e / std::sqrt(static_cast<float>(head_dim));
  return a;
}

// Every launch's grid must fit: at most 2^31 - 1 blocks of 128 threads over
// (rows * heads * splits * 32) threads for the warp kernel, the largest.
void check_launch_size(int64_t rows, int num_heads, int splits) {
  const int64_t threads = rows * num_heads * int64_t{splits} * 32;
  LB_CHECK(rows * num_heads * int64_t{std::max(splits, 1)} <= (int64_t{1} << 36) &&
               threads / 128 < std::numeric_limits<int32_t>::max(),
           "cuda attention: {} queries x {} heads x {} splits is too large for one launch", rows, num_heads,
           splits);
}

}  // namespace

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::Auto: return "auto";
    case AttentionKernel::Naive: return "naive";
    case AttentionKernel::Warp: return "warp";
    case AttentionKernel::Mma: return "mma";
    case AttentionKernel::WgmmaWs: return "wgmma-ws";
  }
  return "?";
}

AttentionKernel attention_auto_kernel(DType dtype, int head_dim, AttentionKernel auto_choice) {
  return resolve(AttentionKernel::Auto, dtype, head_dim, true, auto_choice);
}

void attention_dense(const Tensor& q, const Tensor& k, const Tensor& v, int groups, int num_heads, int head_dim,
                     Tensor& out, cudaStream_t stream, AttentionKernel auto_choice) {
  attention_dense_with(AttentionKernel::Auto, q, k, v, groups, num_heads, head_dim, out, stream, auto_choice);
}

void attention_dense_with(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v, int groups,
                          int num_heads, int head_dim, Tensor& out, cudaStream_t stream,
                          AttentionKernel auto_choice) {
  check_device_tensor(q, "q");
  check_device_tensor(k, "k");
  check_device_tensor(v, "v");
  check_device_tensor(out, "out");
  LB_CHECK(groups >= 1 && num_heads >= 1 && head_dim >= 1,
           "cuda attention: groups ({}), num_heads ({}) and head_dim ({}) must be >= 1", groups, num_heads,
           head_dim);
  LB_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype() && out.dtype() == q.dtype(),
           "cuda attention: q, k, v and out must share one dtype, got {}, {}, {}, {}", dtype_name(q.dtype()),
           dtype_name(k.dtype()), dtype_name(v.dtype()), dtype_name(out.dtype()));
  const int64_t row = int64_t{num_heads} * head_dim;
  const int64_t group_elems = int64_t{groups} * row;
  LB_CHECK(q.numel() % group_elems == 0, "cuda attention: q {} is not {} groups of rows of {} x {}",
           q.describe(), groups, num_heads, head_dim);
  const int64_t n = q.numel() / group_elems;
  LB_CHECK(k.numel() == q.numel() && v.numel() == q.numel() && out.numel() == q.numel(),
           "cuda attention: q {}, k {}, v {} and out {} must have the same size", q.describe(), k.describe(),
           v.describe(), out.describe());
  LB_CHECK(n * groups <= std::numeric_limits<int32_t>::max() / 2, "cuda attention: {} rows is too many",
           n * groups);
  LB_CHECK(!overlaps(out, q) && !overlaps(out, k) && !overlaps(out, v), "cuda attention: out overlaps q, k or v");
  if (n == 0) return;
  check_launch_size(n * groups, num_heads, 1);
  const bool mma_aligned =
      aligned(k.data(), 16) && aligned(v.data(), 16) && aligned(q.data(), 4) && aligned(out.data(), 4);
  kernel = resolve(kernel, q.dtype(), head_dim, mma_aligned, auto_choice);

  const auto rows = static_cast<int32_t>(n);
  if (q.dtype() == DType::BF16) {
    auto a = make_args<bf16>(q, out, groups, rows, num_heads, head_dim);
    a.zero_fill_src = k.data();  // 16-byte aligned whenever a tensor-core kernel runs
    const DenseKeys<bf16> keys{static_cast<const bf16*>(k.data()), static_cast<const bf16*>(v.data()), row, rows,
                               head_dim};
    attn::launch_attention(kernel, a, keys, stream);
  } else {
    const auto a = make_args<float>(q, out, groups, rows, num_heads, head_dim);
    const DenseKeys<float> keys{static_cast<const float*>(k.data()), static_cast<const float*>(v.data()), row,
                                rows, head_dim};
    attn::launch_attention(kernel, a, keys, stream);
  }
}

int attention_paged_splits(AttentionKernel kernel, int64_t nq, int num_heads) {
  if (nq <= 0 || kernel == AttentionKernel::Naive) return 1;
  const DeviceInfo info = device_info();
  if (kernel == AttentionKernel::Mma || kernel == AttentionKernel::WgmmaWs) {
    // Equal CTAs, `slots` of them resident at once. A split adds a combine
    // pass (the partial outputs written and read once), so: no split when a
    // full wave or more runs at >= 85% of the slots; else the fewest splits
    // whose last wave is within 3% of the fullest possible.
    const int ws_consumers = attn::wgmma_ws_consumers(PagedKeys<bf16>{});
    const int64_t rows_per_cta =
        kernel == AttentionKernel::WgmmaWs ? attn::wgmma_ws_query_rows(ws_consumers) : attn::kMmaQueryRows;
    const int64_t ctas = (nq + rows_per_cta - 1) / rows_per_cta * num_heads;
    const int per_sm = kernel == AttentionKernel::Mma ? attn::attention_mma_ctas_per_sm()
                                                      : attn::attention_wgmma_ws_ctas_per_sm(ws_consumers);
    const int64_t slots = int64_t{info.sms} * per_sm;
    auto efficiency = [&](int splits) {
      const int64_t total = ctas * splits;
      const int64_t waves = (total + slots - 1) / slots;
      return static_cast<double>(total) / static_cast<double>(waves * slots);
    };
    if (ctas >= slots && efficiency(1) >= 0.85) return 1;
    constexpr int kMaxSplits = 16;
    double best = 0;
    for (int splits = 1; splits <= kMaxSplits; ++splits) best = std::max(best, efficiency(splits));
    for (int splits = 1; splits <= kMaxSplits; ++splits) {
      if (efficiency(splits) >= best - 0.03) return splits;
    }
    return 1;
  }
  // Warp kernel: aim for 8 warps per SM; few queries (the camera head) split
  // their keys, into at most kMaxWarpSplits parts. (The key count is not
  // known here: a captured graph replays the same split count while the
  // camera head's cache grows by a token per frame, from a few tokens to
  // thousands. 32 parts keep the combine pass small while there are few
  // keys and give ~300 keys per warp at 10,000 frames.)
  constexpr int64_t kMaxSplits = kMaxWarpSplits;
  const int64_t target = int64_t{info.sms} * 8;
  const int64_t items = nq * num_heads;
  return static_cast<int>(std::clamp<int64_t>((target + items - 1) / items, 1, kMaxSplits));
}

namespace {

// attention_paged's checks of q, out, the table and the split count; nq.
int64_t check_paged_args(const Tensor& q, const Tensor& out, const KvTableHeader* table, int block, int num_heads,
                         int head_dim, int splits) {
  check_device_tensor(q, "q");
  check_device_tensor(out, "out");
  LB_CHECK(table != nullptr, "cuda attention: null key table");
  LB_CHECK(block >= 0 && num_heads >= 1 && head_dim >= 1,
           "cuda attention: bad block ({}), num_heads ({}) or head_dim ({})", block, num_heads, head_dim);
  LB_CHECK(out.dtype() == q.dtype(), "cuda attention: q is {} but out is {}", dtype_name(q.dtype()),
           dtype_name(out.dtype()));
  const int64_t row = int64_t{num_heads} * head_dim;
  LB_CHECK(q.numel() % row == 0 && out.numel() == q.numel(),
           "cuda attention: q {} and out {} must both be [nq, {}, {}]", q.describe(), out.describe(), num_heads,
           head_dim);
  LB_CHECK(!overlaps(out, q), "cuda attention: out overlaps q");
  const int64_t nq = q.numel() / row;
  LB_CHECK(nq <= std::numeric_limits<int32_t>::max() / 2, "cuda attention: {} queries is too many", nq);
  LB_CHECK(splits >= 0 && splits <= 65535, "cuda attention: splits must be in [0, 65535], got {}", splits);
  return nq;
}

// Points a at its split partials in scratch (splits > 1).
template <typename T>
void set_partials(AttentionArgs<T>& a, DeviceScratch& scratch, int64_t nq, int num_heads, int head_dim, int splits) {
  if (splits <= 1) return;
  const int64_t per_split = nq * num_heads;
  auto* p = scratch.get_as<float>(int64_t{splits} * per_split * (head_dim + 1));
  a.part_o = p;
  a.part_lse = p + int64_t{splits} * per_split * head_dim;
}

}  // namespace

void attention_paged(const Tensor& q, const KvTableHeader* table, int block, int num_heads, int head_dim,
                     Tensor& out, DeviceScratch& scratch, cudaStream_t stream, AttentionKernel kernel, int splits,
                     AttentionKernel auto_choice) {
  const int64_t nq = check_paged_args(q, out, table, block, num_heads, head_dim, splits);
  if (nq == 0) return;
  // Pages are 16-byte aligned by construction (kv_table.h), so only q/out matter.
  kernel = resolve(kernel, q.dtype(), head_dim, aligned(q.data(), 4) && aligned(out.data(), 4), auto_choice);
  if (kernel == AttentionKernel::Naive) splits = 1;
  if (splits == 0) splits = attention_paged_splits(kernel, nq, num_heads);
  check_launch_size(nq, num_heads, splits);

  auto run = [&](auto tag) {
    using T = decltype(tag);
    auto a = make_args<T>(q, out, 1, static_cast<int32_t>(nq), num_heads, head_dim);
    a.splits = splits;
    a.zero_fill_src = table;  // device_malloc'd: 256-byte aligned
    set_partials(a, scratch, nq, num_heads, head_dim, splits);
    const PagedKeys<T> keys{table, block, head_dim};
    attn::launch_attention(kernel, a, keys, stream);
  };
  if (q.dtype() == DType::BF16) {
    run(bf16{});
  } else {
    run(float{});
  }
}

bool fp8_attention_in_kernel(AttentionKernel kernel, int head_dim, AttentionKernel auto_choice) {
  if (kernel != AttentionKernel::Auto && kernel != AttentionKernel::WgmmaWs) return false;
  if (head_dim != 64 || device_info().major != 9) return false;
  return resolve(kernel, DType::BF16, head_dim, true, auto_choice) == AttentionKernel::WgmmaWs;
}

void attention_paged_fp8(const Tensor& q, const KvTableHeader* table, int block, int num_heads, int head_dim,
                         Tensor& out, DeviceScratch& scratch, cudaStream_t stream, AttentionKernel kernel, int splits,
                         AttentionKernel auto_choice) {
  const int64_t nq = check_paged_args(q, out, table, block, num_heads, head_dim, splits);
  LB_CHECK(q.dtype() == DType::BF16, "cuda attention: fp8 keys take bfloat16 queries, got {}", q.describe());
  LB_CHECK(fp8_attention_in_kernel(kernel, head_dim, auto_choice),
           "cuda attention: the {} kernel does not read fp8 pages (only wgmma-ws does, on Hopper with head_dim 64; "
           "the others read them back to bfloat16 first)", attention_kernel_name(kernel));
  LB_CHECK(aligned(q.data(), 4) && aligned(out.data(), 4), "cuda attention: fp8 keys need 4-byte aligned q/out");
  if (nq == 0) return;
  if (splits == 0) splits = attention_paged_splits(AttentionKernel::WgmmaWs, nq, num_heads);
  check_launch_size(nq, num_heads, splits);
  auto a = make_args<bf16>(q, out, 1, static_cast<int32_t>(nq), num_heads, head_dim);
  a.splits = splits;
  a.zero_fill_src = table;
  set_partials(a, scratch, nq, num_heads, head_dim, splits);
  attn::launch_attention(AttentionKernel::WgmmaWs, a, PagedFp8Keys{table, block, head_dim}, stream);
}

}  // namespace lingbot::cuda
