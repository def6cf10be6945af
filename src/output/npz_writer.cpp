#include "output/npz_writer.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace lingbot::io {

namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    case DType::I64: return "<i8";
    case DType::I32: return "<i4";
    case DType::I16: return "<i2";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::Bool: return "|b1";
    case DType::BF16: break;  // numpy has no bfloat16
  }
  fail("npz: cannot store {} arrays (numpy has no such type)", dtype_name(t));
}

// Little-endian field writers.
void le16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void le32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void le64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50;
constexpr uint32_t kZip64End = 0x06064b50, kZip64Locator = 0x07064b50, kEnd = 0x06054b50;
constexpr uint16_t kVersion = 45;  // 4.5: ZIP64
constexpr uint16_t kDosTime = 0, kDosDate = (1 << 5) | 1;  // 1980-01-01: reproducible archives

}  // namespace

std::string npy_header(DType dtype, const Shape& shape) {
  std::string dict = "{'descr': '" + std::string(npy_descr(dtype)) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (i + 1 < shape.size() || shape.size() == 1) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

NpzWriter::NpzWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) fail("{}: cannot create: {}", path, std::strerror(errno));
}

NpzWriter::~NpzWriter() {
  if (file_) {
    try {
      close();
    } catch (...) {
    }
  }
}

void NpzWriter::put(const void* data, size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) fail("{}: write failed: {}", path_, std::strerror(errno));
}

void NpzWriter::add(const std::string& name, const Tensor& t) {
  LB_CHECK(t.is_cpu(), "npz: {} must be on the cpu", name);
  begin_array(name, t.dtype(), t.shape());
  write(t.data(), t.nbytes());
  end_array();
}

void NpzWriter::begin_array(const std::string& name, DType dtype, const Shape& shape) {
  LB_CHECK(file_ && !in_array_, "{}: begin_array('{}') while another array is open or after close", path_, name);
  const std::string header = npy_header(dtype, shape);
  Entry e;
  e.name = name + ".npy";
  e.offset = static_cast<uint64_t>(std::ftell(file_));
  // Local header with ZIP64 sizes; size and CRC are patched in end_array().
  std::vector<uint8_t> b;
  le32(b, kLocalHeader);
  le16(b, kVersion);
  le16(b, 0);  // flags
  le16(b, 0);  // stored
  le16(b, kDosTime);
  le16(b, kDosDate);
  le32(b, 0);           // crc (patched)
  le32(b, 0xffffffff);  // sizes live in the ZIP64 extra field
  le32(b, 0xffffffff);
  le16(b, static_cast<uint16_t>(e.name.size()));
  le16(b, 20);
  b.insert(b.end(), e.name.begin(), e.name.end());
  le16(b, 0x0001);
  le16(b, 16);
  le64(b, 0);  // uncompressed (patched)
  le64(b, 0);  // compressed (patched)
  put(b.data(), b.size());
  entries_.push_back(e);
  in_array_ = true;
  data_start_ = static_cast<uint64_t>(std::ftell(file_));
  written_bytes_ = 0;
  expected_bytes_ = static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype);
  crc_ = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  put(header.data(), header.size());
  crc_ = static_cast<uint32_t>(crc32(crc_, reinterpret_cast<const Bytef*>(header.data()), static_cast<uInt>(header.size())));
}

void NpzWriter::write(const void* data, size_t bytes) {
  LB_CHECK(in_array_, "{}: write without begin_array", path_);
  LB_CHECK(written_bytes_ + bytes <= expected_bytes_, "{}: array '{}' given more data than its shape holds", path_,
           entries_.back().name);
  put(data, bytes);
  const auto* p = static_cast<const Bytef*>(data);
  for (size_t done = 0; done < bytes;) {  // crc32 takes 32-bit lengths
    const size_t n = std::min<size_t>(bytes - done, size_t{1} << 30);
    crc_ = static_cast<uint32_t>(crc32(crc_, p + done, static_cast<uInt>(n)));
    done += n;
  }
  written_bytes_ += bytes;
}

void NpzWriter::end_array() {
  LB_CHECK(in_array_, "{}: end_array without begin_array", path_);
  Entry& e = entries_.back();
  LB_CHECK(written_bytes_ == expected_bytes_, "{}: array '{}' got {} bytes, its shape needs {}", path_, e.name,
           written_bytes_, expected_bytes_);
  const uint64_t end = static_cast<uint64_t>(std::ftell(file_));
  e.size = end - data_start_;
  e.crc = crc_;
  // Patch the CRC (offset 14) and the ZIP64 sizes (after the name, +4).
  std::vector<uint8_t> crc, sizes;
  le32(crc, e.crc);
  le64(sizes, e.size);
  le64(sizes, e.size);
  std::fseek(file_, static_cast<long>(e.offset + 14), SEEK_SET);
  put(crc.data(), crc.size());
  std::fseek(file_, static_cast<long>(e.offset + 30 + e.name.size() + 4), SEEK_SET);
  put(sizes.data(), sizes.size());
  std::fseek(file_, static_cast<long>(end), SEEK_SET);
  in_array_ = false;
}

void NpzWriter::close() {
  if (!file_) return;
  LB_CHECK(!in_array_, "{}: close() with array '{}' still open", path_, entries_.back().name);
  const uint64_t cd_start = static_cast<uint64_t>(std::ftell(file_));
  std::vector<uint8_t> b;
  for (const Entry& e : entries_) {
    le32(b, kCentralHeader);
    le16(b, kVersion);  // made by
    le16(b, kVersion);  // needed
    le16(b, 0);
    le16(b, 0);
    le16(b, kDosTime);
    le16(b, kDosDate);
    le32(b, e.crc);
    le32(b, 0xffffffff);
    le32(b, 0xffffffff);
    le16(b, static_cast<uint16_t>(e.name.size()));
    le16(b, 28);  // ZIP64 extra: sizes and offset
    le16(b, 0);   // comment
    le16(b, 0);   // disk
    le16(b, 0);   // internal attributes
    le32(b, 0);   // external attributes
    le32(b, 0xffffffff);
    b.insert(b.end(), e.name.begin(), e.name.end());
    le16(b, 0x0001);
    le16(b, 24);
    le64(b, e.size);
    le64(b, e.size);
    le64(b, e.offset);
  }
  const uint64_t cd_size = b.size();
  const uint64_t zip64_end = cd_start + cd_size;
  le32(b, kZip64End);
  le64(b, 44);
  le16(b, kVersion);
  le16(b, kVersion);
  le32(b, 0);
  le32(b, 0);
  le64(b, entries_.size());
  le64(b, entries_.size());
  le64(b, cd_size);
  le64(b, cd_start);
  le32(b, kZip64Locator);
  le32(b, 0);
  le64(b, zip64_end);
  le32(b, 1);
  le32(b, kEnd);
  le16(b, 0);
  le16(b, 0);
  le16(b, 0xffff);
  le16(b, 0xffff);
  le32(b, 0xffffffff);
  le32(b, 0xffffffff);
  le16(b, 0);
  put(b.data(), b.size());
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) fail("{}: cannot finish writing: {}", path_, std::strerror(errno));
}

ArraySpool::ArraySpool(std::string name, DType dtype, Shape item_shape, const std::string& temp_path)
    : name_(std::move(name)), dtype_(dtype), item_shape_(std::move(item_shape)), temp_path_(temp_path) {
  file_ = std::fopen(temp_path_.c_str(), "w+b");
  if (!file_) fail("{}: cannot create temporary file: {}", temp_path_, std::strerror(errno));
}

ArraySpool::~ArraySpool() {
  if (file_) std::fclose(file_);
  std::remove(temp_path_.c_str());
}

void ArraySpool::append(const Tensor& item) {
  LB_CHECK(item.is_cpu() && item.dtype() == dtype_ && item.shape() == item_shape_, "array '{}': item {} expected {} {}",
           name_, item.describe(), dtype_name(dtype_), shape_str(item_shape_));
  if (std::fwrite(item.data(), 1, item.nbytes(), file_) != item.nbytes())
    fail("{}: write failed: {}", temp_path_, std::strerror(errno));
  ++items_;
}

void ArraySpool::copy_into(NpzWriter& npz) {
  Shape shape = item_shape_;
  shape.insert(shape.begin(), items_);
  npz.begin_array(name_, dtype_, shape);
  std::fflush(file_);
  std::rewind(file_);
  std::vector<char> buf(size_t{8} << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), file_)) > 0) npz.write(buf.data(), n);
  npz.end_array();
}

}  // namespace lingbot::io
