// Writing NumPy .npz archives (what np.load reads), streaming.
//
// An .npz is a ZIP of .npy files. Arrays are written uncompressed, one after
// the other, each streamed in pieces so that a 10,000-frame result never has
// to sit in memory: begin_array(), write() as often as needed, end_array().
// Entries always carry ZIP64 sizes, so arrays and archives may exceed 4 GB.
//
// ArraySpool collects an array frame by frame in a temporary file when
// several arrays grow together (depth, confidence, points, ...);
// write_npz_moving_spools() then moves the spools into an archive without
// ever holding two copies of the data on disk.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lingbot::io {

class NpzWriter {
 public:
  explicit NpzWriter(const std::string& path);  // creates or truncates
  ~NpzWriter();                                  // closes if close() was not called (errors ignored)
  NpzWriter(const NpzWriter&) = delete;
  NpzWriter& operator=(const NpzWriter&) = delete;

  // A whole array from a CPU tensor.
  void add(const std::string& name, const Tensor& t);
  // Streaming: exactly numel(shape) * dtype_size bytes must be written.
  void begin_array(const std::string& name, DType dtype, const Shape& shape);
  void write(const void* data, size_t bytes);
  void end_array();
  // Writes the central directory. Throws on I/O errors.
  void close();

 private:
  struct Entry {
    std::string name;  // "<array>.npy"
    uint64_t offset = 0;
    uint64_t size = 0;
    uint32_t crc = 0;
  };
  void put(const void* data, size_t bytes);

  std::string path_;
  FILE* file_ = nullptr;
  std::vector<Entry> entries_;
  bool in_array_ = false;
  uint64_t expected_bytes_ = 0;
  uint64_t written_bytes_ = 0;
  uint64_t data_start_ = 0;
  uint32_t crc_ = 0;
};

// One array grown item by item (e.g. one frame at a time) in a temporary
// file next to the final output.
class ArraySpool {
 public:
  ArraySpool(std::string name, DType dtype, Shape item_shape, const std::string& temp_path);
  ~ArraySpool();  // removes the temporary file
  ArraySpool(const ArraySpool&) = delete;
  ArraySpool& operator=(const ArraySpool&) = delete;

  void append(const Tensor& item);  // shape item_shape, dtype
  int64_t items() const { return items_; }
  const std::string& name() const { return name_; }
  // The .npy header of the array [items, item_shape...] and its data size.
  std::string npy_header() const;
  uint64_t data_bytes() const;
  // Adds the array [items, item_shape...] to `npz`.
  void copy_into(NpzWriter& npz);
  // Moves the data to `fd` at `offset` back to front, one chunk (as many
  // whole items as fit in 1 MiB, at least one) at a time, truncating the spool behind each chunk, so the
  // disk never holds more than one chunk twice. Returns the data's CRC-32.
  // The spool is empty afterwards.
  uint32_t move_to(int fd, uint64_t offset, const std::string& target);

 private:
  std::string name_;
  DType dtype_;
  Shape item_shape_;
  std::string temp_path_;
  FILE* file_ = nullptr;
  int64_t items_ = 0;
};

// The .npy header of an array (magic, version 1.0, dict, padding to 64 bytes).
std::string npy_header(DType dtype, const Shape& shape);

// A whole .npy file of a CPU tensor (header and data), e.g. for NpzMember::npy.
std::string npy_file(const Tensor& t);

// A whole .npy file of NumPy unicode strings ('<U{longest}', UTF-32; what
// np.array(list_of_str) saves), from UTF-8 text. Our npz reader returns such
// an array as int32 code points [..., longest] (npz_reader.h).
std::string npy_strings(const std::vector<std::string>& utf8);

// One member of write_npz_moving_spools(): a spool, or a whole .npy in memory.
struct NpzMember {
  std::string name;            // without ".npy"
  ArraySpool* spool = nullptr;
  std::string npy;             // when spool is null
};

// Writes the .npz `path` (created or truncated) from `members`, in order.
// Data are placed at their final offsets (the file grows with holes where
// later chunks go), so the peak disk use is the archive plus one chunk.
// Throws "TARGET: write failed: ..." (e.g. a full disk); `path` is then partial.
void write_npz_moving_spools(const std::string& path, const std::vector<NpzMember>& members,
                             const std::string& target);

}  // namespace lingbot::io
