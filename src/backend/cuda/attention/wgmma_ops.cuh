// Hopper (sm_90a) building blocks of the warpgroup-MMA attention kernels
// (attention_wgmma_ws.cu): inline PTX for cp.async,
// mbarriers, named barriers, wgmma and its shared-memory descriptors.
// Everything here compiles only where LB_WGMMA is 1 (device code for
// sm_90a); the kernels trap elsewhere and the host never launches them.
//
// Shared-memory matrix descriptors (PTX ISA, "Matrix Descriptor Format"):
//   bits 0-13 address >> 4, 16-29 leading byte offset >> 4, 32-45 stride
//   byte offset >> 4, 62-63 swizzle (1 = 128B).
// Tiles are rows of 64 bf16 (128 bytes) with the 16-byte chunks of row r
// XOR-permuted by r % 8 (tile_offset): on a tile that starts on a 1024-byte
// boundary that is exactly wgmma's 128B swizzle.
//   K tile as the B operand of S = Q K^T (K-major): stride byte offset 1024
//     (8 rows of 128 B), leading byte offset unused (16); k-step kk (16 dims)
//     starts 32 kk bytes into the row.
//   V tile as the B operand of O += P V (MN-major, transposed): the 64 dims
//     are one swizzle atom wide, so only the stride between 8-key groups
//     (1024 bytes) is used; both offsets are set to it. k-step kk (16 keys)
//     starts 2048 kk bytes in.
// The accumulator fragment of wgmma m64nNk16 is, per warp, mma.sync's C
// fragment repeated per 8 columns: d[4j + e] is (row lr + 8 (e / 2), column
// 8j + 2 lc + e % 2), lr = lane / 4, lc = lane % 4; the A fragment in
// registers is mma.sync's A fragment.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LB_WGMMA 1
#else
#define LB_WGMMA 0
#endif

namespace lingbot::cuda::attn::wg {

constexpr int kD = 64;  // head_dim of the tensor-core kernels: one 128-byte row

#if LB_WGMMA
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Element offset of 16-byte chunk `chunk` of row `row` in a swizzled tile.
__device__ __forceinline__ int tile_offset(int row, int chunk) { return row * kD + ((chunk ^ (row & 7)) << 3); }

// 16 bytes global -> shared, asynchronously; src_bytes 0 writes zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait0() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Orders this thread's generic-proxy shared-memory accesses (cp.async
// writes, plain stores) with its later async-proxy ones (wgmma reads).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// --- mbarriers (shared memory, 8 bytes each) ---
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Arrives on `bar` once all of this thread's earlier cp.async copies have
// landed, without counting as an extra expected arrival (.noinc): a barrier
// initialised with the number of copying threads completes its phase when
// every one of them has issued this and its copies are in shared memory.
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_addr(bar))
               : "memory");
}
// `count` arrivals at once (one thread arriving for its warp).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar, uint32_t count) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(smem_addr(bar)),
               "r"(count)
               : "memory");
}
// One arrival that also expects `bytes` more from asynchronous copies (TMA):
// the phase completes when every arrival is in and the bytes have landed.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// Waits until the phase of `bar` with parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// --- TMA (tensor maps in global memory, tensor_map.h) ---
// Makes a tensor map written before the launch (a copy from the host)
// visible to the TMA unit's reads of it.
__device__ __forceinline__ void tensormap_acquire(const void* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(map) : "memory");
}
// The box of a 4-D tensor map at coordinates (c0 .. c3, innermost first)
// into shared memory at `dst`; its bytes count against `bar`'s expected
// transaction bytes.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* map, int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}

// --- named barriers (ids 1..15; 0 is __syncthreads) ---
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// --- register reallocation between warpgroups ---
template <int kRegs>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// --- wgmma ---
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving reads or writes of an accumulator across
// the asm statements that issue and wait for asynchronous wgmma groups.
template <int N>
__device__ __forceinline__ void pin_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void pin_registers(uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

__device__ __forceinline__ uint64_t smem_desc(const void* tile, uint32_t leading, uint32_t stride) {
  const uint64_t addr = smem_addr(tile);
  return ((addr >> 4) & 0x3fffu) | (uint64_t{(leading >> 4) & 0x3fffu} << 16) |
         (uint64_t{(stride >> 4) & 0x3fffu} << 32) | (uint64_t{1} << 62);
}
// Descriptor of k-step kk of a K tile (B of S = Q K^T) and of a V tile (B of O += P V).
__device__ __forceinline__ uint64_t k_desc(const __nv_bfloat16* tile, int kk) {
  return smem_desc(reinterpret_cast<const char*>(tile) + 32 * kk, 16, 1024);
}
__device__ __forceinline__ uint64_t v_desc(const __nv_bfloat16* tile, int kk) {
  return smem_desc(reinterpret_cast<const char*>(tile) + 2048 * kk, 1024, 1024);
}

// A descriptor kept as its two 32-bit words, for loops that address many
// tiles from one base: the address field is the low 14 bits of `lo` and a
// CTA's shared memory (< 256 KiB) never carries out of it, so moving the
// descriptor `bytes` further is one 32-bit add of bytes / 16 (building it
// from a pointer each time costs ~5 dependent uniform instructions per wgmma).
struct DescBase {
  uint32_t lo, hi;
  __device__ __forceinline__ static DescBase of(uint64_t desc) {
    return {static_cast<uint32_t>(desc), static_cast<uint32_t>(desc >> 32)};
  }
  __device__ __forceinline__ uint64_t at(uint32_t bytes) const {
    return (uint64_t{hi} << 32) | (lo + (bytes >> 4));
  }
};

// The accumulator operands d[i] .. d[i + 7] of a wgmma asm statement ("+f":
// read and written), eight to a group, in the order of the %0, %1, ...
// registers of its instruction string.
#define LB_WGMMA_D8(i)                                                                                  \
  "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
      "+f"(d[(i) + 6]), "+f"(d[(i) + 7])

// d[32] (+)= a (registers, 16 rows per warp x 16) * B (descriptor, 16 x 64).
// accumulate = false overwrites d. kTransB: B is MN-major.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc,
                                                bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %38, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n"
      "}\n"
      : LB_WGMMA_D8(0), LB_WGMMA_D8(8), LB_WGMMA_D8(16), LB_WGMMA_D8(24)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "n"(kTransB), "r"(static_cast<int>(accumulate)));
}

// d[96] (+)= a (registers) * B (descriptor, 16 x 192), B K-major.
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], const uint32_t (&a)[4], uint64_t desc,
                                                 bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %101, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
      "{%96, %97, %98, %99}, %100, p, 1, 1, 0;\n"
      "}\n"
      : LB_WGMMA_D8(0), LB_WGMMA_D8(8), LB_WGMMA_D8(16), LB_WGMMA_D8(24),
        LB_WGMMA_D8(32), LB_WGMMA_D8(40), LB_WGMMA_D8(48), LB_WGMMA_D8(56),
        LB_WGMMA_D8(64), LB_WGMMA_D8(72), LB_WGMMA_D8(80), LB_WGMMA_D8(88)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)));
}

// d[64] (+)= A (descriptor, 64 x 16, K-major) * B (descriptor, 16 x 128,
// K-major): both operands from shared memory.
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a_desc, uint64_t b_desc,
                                                    bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : LB_WGMMA_D8(0), LB_WGMMA_D8(8), LB_WGMMA_D8(16), LB_WGMMA_D8(24),
        LB_WGMMA_D8(32), LB_WGMMA_D8(40), LB_WGMMA_D8(48), LB_WGMMA_D8(56)
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)));
}

#undef LB_WGMMA_D8

#endif  // LB_WGMMA

}  // namespace lingbot::cuda::attn::wg
