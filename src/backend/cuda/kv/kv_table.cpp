#include "backend/cuda/kv/kv_table.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "core/error.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace lingbot::cuda {

static_assert(std::is_trivially_copyable_v<KvTableHeader>);
static_assert(std::is_trivially_copyable_v<DeviceRowMove>);

std::vector<RowMove> row_moves(const kv::StepPlan& plan) {
  std::vector<RowMove> moves;
  for (const kv::RowWrite& w : plan.writes) {
    for (int32_t i = 0; i < w.count; ++i) moves.push_back({w.page, w.slot + i, -1, w.src_row + i});
  }
  // Copies run after the writes: a source slot written by this step holds
  // that write's input row, so read the row itself.
  auto written_row = [&](int32_t page, int32_t slot) -> int64_t {
    for (const kv::RowWrite& w : plan.writes) {
      if (w.page == page && slot >= w.slot && slot < w.slot + w.count) return w.src_row + (slot - w.slot);
    }
    return -1;
  };
  for (const kv::SlotCopy& c : plan.copies) {
    for (int32_t i = 0; i < c.count; ++i) {
      const int64_t row = written_row(c.src_page, c.src_slot + i);
      if (row >= 0) {
        moves.push_back({c.dst_page, c.dst_slot + i, -1, row});
      } else {
        moves.push_back({c.dst_page, c.dst_slot + i, c.src_page, c.src_slot + i});
      }
    }
  }
  return moves;
}

namespace {
constexpr size_t kHeaderBytes = 128;  // the header's slot at the start of a staging buffer
static_assert(sizeof(KvTableHeader) <= kHeaderBytes);
}  // namespace

KvTable::KvTable(cudaStream_t stream) : stream_(stream) {
  header_dev_ = static_cast<KvTableHeader*>(device_malloc(sizeof(KvTableHeader), "kv cache table header"));
  const KvTableHeader empty;
  LB_CUDA_CHECK(cudaMemcpy(header_dev_, &empty, sizeof(empty), cudaMemcpyHostToDevice));
  for (Staging& s : staging_) LB_CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
}

KvTable::~KvTable() {
  // Destructors must not throw: release what we can, ignore errors.
  cudaStreamSynchronize(stream_);
  for (Staging& s : staging_) {
    if (s.host) cudaFreeHost(s.host);
    if (s.copied) cudaEventDestroy(s.copied);
  }
  device_free(arrays_dev_);
  device_free(header_dev_);
}

void KvTable::upload(const KvTableHeader& header, const std::vector<char*>& page_ptrs,
                     const std::vector<DeviceRowMove>& moves, const std::vector<int32_t>& page_ids,
                     const std::vector<TensorMap>& tensor_maps) {
  check_not_capturing(stream_, "uploading the kv cache table (begin_step)");
  LB_ASSERT(static_cast<int64_t>(page_ptrs.size()) == header.num_pages);
  LB_ASSERT(static_cast<int64_t>(moves.size()) == header.num_moves);
  const bool tma = !tensor_maps.empty();
  LB_ASSERT(!tma || page_ids.size() == page_ptrs.size());
  // Arrays: [page_ptrs][moves][page_ids][tensor_maps], the moves 16-byte
  // and the maps 64-byte aligned (the device allocation is 256-aligned).
  auto align = [](size_t n, size_t a) { return (n + a - 1) / a * a; };
  const size_t ptr_bytes = page_ptrs.size() * sizeof(char*);
  const size_t moves_offset = align(ptr_bytes, 16);
  const size_t ids_offset = moves_offset + moves.size() * sizeof(DeviceRowMove);
  const size_t ids_bytes = tma ? page_ids.size() * sizeof(int32_t) : 0;
  const size_t maps_offset = align(ids_offset + ids_bytes, alignof(TensorMap));
  const size_t array_bytes = maps_offset + tensor_maps.size() * sizeof(TensorMap);

  if (array_bytes > arrays_capacity_) {
    // The old arrays may still be read by enqueued kernels: wait, then regrow.
    check_not_capturing(stream_, "growing the kv cache table");
    LB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    device_free(arrays_dev_);
    arrays_dev_ = nullptr;
    arrays_capacity_ = 0;
    const size_t capacity = std::max<size_t>(4096, array_bytes * 2);
    arrays_dev_ = static_cast<char*>(device_malloc(capacity, "kv cache table"));
    arrays_capacity_ = capacity;
  }

  Staging& s = staging_[static_cast<size_t>(next_staging_)];
  next_staging_ ^= 1;
  if (s.pending) {
    LB_CUDA_CHECK(cudaEventSynchronize(s.copied));  // its previous copy has been read
    s.pending = false;
  }
  const size_t staging_bytes = kHeaderBytes + array_bytes;
  if (staging_bytes > s.capacity) {
    LB_CUDA_CHECK(cudaFreeHost(s.host));
    s.host = nullptr;
    s.capacity = 0;
    const size_t capacity = std::max<size_t>(8192, staging_bytes * 2);
    LB_CUDA_CHECK(cudaHostAlloc(&s.host, capacity, cudaHostAllocDefault));  // pinned: async copies
    s.capacity = capacity;
  }

  auto* host = static_cast<char*>(s.host);
  KvTableHeader h = header;
  h.page_ptrs = reinterpret_cast<char* const*>(arrays_dev_);
  h.moves = reinterpret_cast<const DeviceRowMove*>(arrays_dev_ + moves_offset);
  h.page_ids = tma ? reinterpret_cast<const int32_t*>(arrays_dev_ + ids_offset) : nullptr;
  h.tensor_maps = tma ? reinterpret_cast<const TensorMap*>(arrays_dev_ + maps_offset) : nullptr;
  if (!tma) h.tma_box_rows = h.num_tensor_maps = 0;
  LB_ASSERT(!tma || h.num_tensor_maps == static_cast<int32_t>(tensor_maps.size()));
  std::memcpy(host, &h, sizeof(h));
  if (ptr_bytes) std::memcpy(host + kHeaderBytes, page_ptrs.data(), ptr_bytes);
  if (!moves.empty()) {
    std::memcpy(host + kHeaderBytes + moves_offset, moves.data(), moves.size() * sizeof(DeviceRowMove));
  }
  if (ids_bytes) std::memcpy(host + kHeaderBytes + ids_offset, page_ids.data(), ids_bytes);
  if (tma) std::memcpy(host + kHeaderBytes + maps_offset, tensor_maps.data(), tensor_maps.size() * sizeof(TensorMap));
  if (array_bytes) {
    LB_CUDA_CHECK(cudaMemcpyAsync(arrays_dev_, host + kHeaderBytes, array_bytes, cudaMemcpyHostToDevice, stream_));
  }
  LB_CUDA_CHECK(cudaMemcpyAsync(header_dev_, host, sizeof(h), cudaMemcpyHostToDevice, stream_));
  LB_CUDA_CHECK(cudaEventRecord(s.copied, stream_));
  s.pending = true;
}

}  // namespace lingbot::cuda
