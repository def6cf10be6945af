// StateDict: the named tensors of a checkpoint, in file order.
//
// Tensors usually point straight into the memory-mapped checkpoint (their
// owner keeps the mapping alive), so a StateDict of a 4.6 GB file costs
// little RAM until its tensors are read. Such tensors are READ-ONLY: the
// mapping is PROT_READ, so writing through data() would fault. Copy
// (clone / to_dtype) before modifying a weight in place.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lingbot::io {

// A state dict entry that was not loaded, and why (e.g. "int, not a tensor").
struct SkippedEntry {
  std::string key;
  std::string reason;
};

class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;

  StateDict() = default;
  StateDict(std::string source, std::string format) : source_(std::move(source)), format_(std::move(format)) {}

  // The file (or buffer name) it came from, and "torch" or "safetensors".
  const std::string& source() const { return source_; }
  const std::string& format() const { return format_; }
  // For torch files: where in the pickle the tensors were found: "" for the
  // top-level dict, else the key ("model", "state_dict").
  const std::string& found_under() const { return found_under_; }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const Tensor* find(std::string_view name) const;
  // Throws "<source>: no tensor 'x'".
  const Tensor& at(std::string_view name) const;

  // Entries of the state dict that are not tensors (training metadata and
  // the like), skipped rather than failing the load.
  const std::vector<SkippedEntry>& skipped() const { return skipped_; }

  // Sum of the tensors' sizes in bytes (tensors sharing storage count once each).
  size_t total_bytes() const;
  int64_t total_elements() const;

  // Gives back the resident pages of the tensor `name` (it must be in this
  // dict) when it lies in a memory-mapped file: a caller that has copied or
  // converted the tensor no longer needs them in RAM. The tensor stays
  // valid: reading it again faults the pages back in from the file. Only
  // pages wholly inside the tensor are given back (a neighbour sharing a
  // page keeps it), and a tensor that is not a view of the mapping (a copy
  // made on load, or a dict read from a buffer) is left as it is. Returns
  // the bytes given back.
  size_t release_pages(std::string_view name) const;

  // ---- building (used by the readers) ----
  // Adds a tensor. A name added twice keeps its first position and the last
  // tensor, like assigning to a Python dict.
  void insert(std::string name, Tensor tensor);
  void add_skipped(std::string key, std::string reason) {
    skipped_.push_back({std::move(key), std::move(reason)});
  }
  void set_found_under(std::string key) { found_under_ = std::move(key); }
  // Keeps the underlying file mapping (or buffer) alive with the dict.
  void keep_alive(std::shared_ptr<void> owner) { owner_ = std::move(owner); }
  // The read-only file mapping the tensors are views of (release_pages
  // acts only inside it; MADV_DONTNEED on other memory would zero it).
  void set_mapped_file(std::span<const uint8_t> mapping) { mapping_ = mapping; }

 private:
  std::string source_;
  std::string format_;
  std::string found_under_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<SkippedEntry> skipped_;
  std::shared_ptr<void> owner_;
  std::span<const uint8_t> mapping_;
};

}  // namespace lingbot::io
