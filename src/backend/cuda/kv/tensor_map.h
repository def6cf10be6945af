// TMA tensor maps over the KV cache's page chunks (Hopper).
//
// Why: the paged attention kernel's producer copied each 192-key tile with
// 3,072 sixteen-byte cp.async requests, and the issue of those requests,
// not the bytes, cost the kernel time (docs/attention-kernel.md). A tensor map
// lets one thread move a whole tile of one head (192 slots x 64 dims,
// already in wgmma's 128-byte swizzle) with one instruction, when the tile
// lies inside one page.
//
// One map describes one chunk of the pool as a packed 4-D bf16 tensor,
// innermost first: (dim: head_dim, head: num_heads, slot: page_size,
// kv page: 2 x blocks x pages_per_chunk). A page is [kv][slot][head][dim]
// and chunk[block][page % pages_per_chunk][page] (kv_table.h), so K of
// page p of block b is kv page 2 (b * pages_per_chunk + p % pages_per_chunk)
// and its V the next one.
#pragma once

#include <cstdint>
#include <optional>

namespace lingbot::cuda {

// A CUtensorMap's 128 opaque bytes; TMA reads them from global memory,
// which needs 64-byte alignment.
struct alignas(64) TensorMap {
  unsigned char bytes[128];
};

struct KvChunkGeometry {
  const void* base = nullptr;  // the chunk's first byte
  int64_t kv_pages = 0;        // 2 x blocks x pages_per_chunk
  int32_t page_size = 0;       // slots per page
  int32_t num_heads = 0;
  int32_t head_dim = 0;
};

// The map over one chunk of bf16 pages, read in boxes of one head x
// `box_rows` slots with the 128-byte swizzle; nullopt where TMA cannot serve
// it (head_dim other than 64, pages shorter than a box, no driver entry
// point). Throws lingbot::Error if the driver refuses a geometry it should take.
std::optional<TensorMap> kv_chunk_tensor_map(const KvChunkGeometry& chunk, int box_rows);

}  // namespace lingbot::cuda
